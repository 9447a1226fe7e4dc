package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// ChildRun is a run whose steps come from a loop rather than a plan: an
// agent's model calls and tool calls, reported to the engine's hooks as
// they happen, so that the run is recorded (with the run that started it
// as its parent), logged and traced like any other. Make one with
// [Engine.StartChild]; end it with Finish.
type ChildRun struct {
	r        *run
	quiet    *Engine // runs each tool call as a one-step plan, without hooks or a record
	fallback bool    // the run is a prompt run its planner's fallback took over: Finish ends its state machine
	mu       sync.Mutex
	plan     *Plan
	steps    []*StepRecord
	calls    int
	// offset is how many steps it recorded before a handoff (ContinueChild).
	offset int
	// inline: it goes on inside the resumed run of its own pause, which
	// begins and ends the run (ContinueChild).
	inline bool
}

// StartChild starts a child run of the run that encloses ctx (see
// toolcontext.ExecID), recorded with source as its tool. It counts one
// agent run against the budget ctx carries, and fails with a
// *budget.Exceeded, starting nothing, when that has none left. The
// returned context carries the child's exec id and its budget node (under
// ctx's): what runs under it (a tool call, a nested orchestration, a model
// call) is the child's and draws from its budget. The child is a
// principal (budget.Grant): it may call the tools e allows (the agent's),
// within those of the request it runs for, whatever its caller may call;
// what runs under it can call no more.
func (e *Engine) StartChild(ctx context.Context, source string) (*ChildRun, context.Context, error) {
	c, err := e.newChild(ctx, source)
	if err != nil {
		return nil, ctx, err
	}
	r := c.r
	callHook(r, "RunStarted", r.hooks.RunStarted, RunStartedInfo{Run: r.info, At: r.started})
	ctx = toolcontext.WithExecID(ctx, r.execID)
	return c, toolcontext.WithBudget(ctx, r.budget), nil
}

// newChild makes a child run of source, its agent run counted against
// ctx's budget; the hooks are not told yet.
func (e *Engine) newChild(ctx context.Context, source string) (*ChildRun, error) {
	parent, ok := toolcontext.BudgetFrom(ctx)
	if !ok {
		parent = e.mem.node
	}
	if err := parent.Spend(budget.AgentRuns, 1); err != nil {
		return nil, err
	}
	plan := &Plan{Type: "tool_calls", Schedule: ScheduleSequential, Steps: []*Step{}}
	ce := e.With(RunOptions{Source: source})
	ce.principal = true // an agent acts with its own tools, within its request's
	r := ce.newRun(ctx, &Request{Plan: plan})
	return e.loopRun(r, plan), nil
}

// loopRun returns the ChildRun that makes the steps of r, with plan as
// the plan they add up to.
func (e *Engine) loopRun(r *run, plan *Plan) *ChildRun {
	r.plan = plan
	quiet := *e
	// A call is a step of the run: its one-step plan has no record of its
	// own, so no request of it is kept to resume.
	quiet.hooks, quiet.pauses = noHooks, &memoryPauses{}
	return &ChildRun{r: r, quiet: &quiet, plan: plan}
}

// runFallback hands the run, whose planner failed with err, to its
// fallback.
func (r *run) runFallback(ctx context.Context, err error) *Envelope {
	r.fire(fsm.EventFallback)
	c := r.fallbackRun()
	// What the loop calls is the run's: its children, drawing from its
	// budget node. Its client-final calls pause the run.
	ctx = toolcontext.WithBudget(toolcontext.WithExecID(ctx, r.execID), r.budget)
	if env := r.fallback.Run(r.withClientSide(ctx), c, err); env != nil {
		return env
	}
	return c.Finish(StatusFailed, "", &Error{Code: CodePlannerFailed, Message: err.Error()})
}

// fallbackRun returns the ChildRun that makes the steps of r's fallback,
// which ends r.
func (r *run) fallbackRun() *ChildRun {
	plan := &Plan{Type: "tool_calls", Schedule: ScheduleSequential, Steps: []*Step{}}
	r.info.Plan = plan
	c := r.e.loopRun(r, plan)
	c.fallback = true
	return c
}

// ExecID returns the child run's exec id.
func (c *ChildRun) ExecID() string { return c.r.execID }

// Record returns where the child run's record can be read, if it is kept.
func (c *ChildRun) Record() string { return c.r.recordURI }

// Step records a step that is not a tool call (a model call, say): it
// starts and ends at once with rec, whose ID, Index and Path are set here.
func (c *ChildRun) Step(kind string, rec *StepRecord) {
	c.mu.Lock()
	n := c.offset + len(c.steps)
	rec.ID, rec.Index, rec.Path = fmt.Sprintf("%s_%d", kind, n), n, fmt.Sprintf("steps[%d]", n)
	rec.ExecID = c.r.e.opts.NewID()
	c.steps = append(c.steps, rec)
	c.mu.Unlock()
	callHook(c.r, "StepStarted", c.r.hooks.StepStarted, StepStartedInfo{Run: c.r.info, At: time.Now(), Step: copyRecord(rec)})
	callHook(c.r, "StepEnded", c.r.hooks.StepEnded, StepEndedInfo{Run: c.r.info, At: time.Now(), Step: copyRecord(rec)})
}

// Call runs the tool name with args as a step of the child run: a
// one-step plan of the engine, validated against the tool's input schema
// and run under the engine's limits within ctx's deadline. It returns the
// step's record; a failed call has its Error set.
func (c *ChildRun) Call(ctx context.Context, name string, args map[string]any) *StepRecord {
	c.mu.Lock()
	n := c.offset + len(c.steps)
	id := fmt.Sprintf("call_%d", c.calls)
	c.calls++
	now := time.Now()
	rec := &StepRecord{ID: id, Index: n, Path: fmt.Sprintf("steps[%d]", n), Type: "tool", Tool: name, Status: StatusRunning,
		Arguments: args, StartedAt: &now, ExecID: c.r.e.opts.NewID()}
	c.steps = append(c.steps, rec)
	c.plan.Steps = append(c.plan.Steps, &Step{ID: id, Tool: name, Arguments: args, index: n, path: rec.Path, key: id, explicit: true})
	started := copyRecord(rec)
	c.mu.Unlock()
	callHook(c.r, "StepStarted", c.r.hooks.StepStarted, StepStartedInfo{Run: c.r.info, At: now, Step: started})

	got := c.quiet.callTool(ctx, id, name, args, c.r.req.Bindings, &toolcontext.Call{ExecID: c.r.execID, StepID: id, Auto: true})
	c.mu.Lock()
	got.ID, got.Index, got.Path, got.ExecID, got.StartedAt = id, n, rec.Path, rec.ExecID, &now
	got.DurationMS = time.Since(now).Milliseconds()
	*rec = *got
	ended := copyRecord(rec)
	c.mu.Unlock()
	callHook(c.r, "StepEnded", c.r.hooks.StepEnded, StepEndedInfo{Run: c.r.info, At: time.Now(), Step: ended})
	return ended
}

// Finish ends the child run with status (success, failed or partial), the
// loop's answer and its errors, tells the hooks, and returns its envelope.
func (c *ChildRun) Finish(status, answer string, errs ...*Error) *Envelope {
	return c.FinishWith(status, answer, nil, errs...)
}

// FinishWith is Finish with edit, when set, applied to the envelope's
// artifact before the hooks see it: the loop adds what it knows of the
// run (its planner's record, its warnings).
func (c *ChildRun) FinishWith(status, answer string, edit func(*Artifact), errs ...*Error) *Envelope {
	r := c.r
	defer r.m.Release()
	if c.fallback {
		if status == StatusFailed {
			r.fire(fsm.EventFallbackFailed)
		} else {
			r.fire(fsm.EventFinished)
		}
	}
	env := c.envelope(status, answer, edit, errs)
	r.mu.Lock()
	err := errors.Join(r.internal...)
	r.mu.Unlock()
	callHook(r, "RunFinished", r.hooks.RunFinished, RunFinishedInfo{Run: r.info, At: time.Now(), Envelope: env, Err: err})
	return env
}

// envelope makes the child run's envelope: its steps, edit applied.
func (c *ChildRun) envelope(status, answer string, edit func(*Artifact), errs []*Error) *Envelope {
	r := c.r
	c.mu.Lock()
	a := &Artifact{
		Status: status, Success: status == StatusSuccess, Response: answer, Plan: c.plan,
		Steps: append([]*StepRecord{}, c.steps...), Bindings: map[string]any{}, Errors: []*Error{}, ValidationErrors: []*Issue{},
	}
	// The run made its steps as it went: it ends with as many as it holds.
	r.info.Leaves = len(c.steps)
	c.mu.Unlock()
	for _, rec := range a.Steps {
		if rec.Error != nil {
			a.Errors = append(a.Errors, rec.Error)
		}
	}
	for _, e := range errs {
		if e != nil {
			r.redactError(e)
			a.Errors = append(a.Errors, e)
		}
	}
	if edit != nil {
		edit(a)
	}
	return &Envelope{ArtifactID: r.execID, Artifact: a, full: r.full(), Metadata: Metadata{
		ContextID: r.ids.ContextID, RequestID: r.ids.RequestID, TraceID: r.ids.TraceID, UserID: r.ids.UserID,
		ToolName: r.info.Source, ExecutedAt: r.started.UTC().Format(time.RFC3339Nano),
		DurationMS: time.Since(r.started).Milliseconds(), Depth: r.depth, ExecID: r.execID, Record: r.recordURI,
	}}
}

// CallTool runs one call of the tool name with args as a one-step plan
// whose step is id, and returns the step's record: failed, with a message
// a model can act on, when the call is invalid or the tool failed. The
// run's deadline is ctx's; templates in args may reach bindings.
func (e *Engine) CallTool(ctx context.Context, id, name string, args, bindings map[string]any) *StepRecord {
	return e.callTool(ctx, id, name, args, bindings, nil)
}

// callTool is CallTool; loop, when set, is the tool loop's step the call
// is (the tool is told its ids).
func (e *Engine) callTool(ctx context.Context, id, name string, args, bindings map[string]any, loop *toolcontext.Call) *StepRecord {
	rec := &StepRecord{ID: id, Path: "plan.steps[0]", Type: "tool", Tool: name, Status: StatusFailed, Arguments: args}
	fail := func(code Code, msg string) *StepRecord {
		rec.Error = &Error{StepID: id, Code: code, Message: msg}
		return rec
	}
	doc, err := json.Marshal(map[string]any{"steps": []any{map[string]any{"id": id, "tool": name, "arguments": args}}})
	if err != nil {
		return fail(CodeInvalidArguments, err.Error())
	}
	plan, issues := DecodePlan(doc)
	if len(issues) > 0 {
		return fail(CodeValidation, IssueText(issues))
	}
	// A tool loop cannot wait for a client: a client-final tool is refused
	// with client_in_loop rather than pausing.
	sub := &Request{Plan: plan, Bindings: bindings, NoPause: true, loop: loop}
	if dl, ok := ctx.Deadline(); ok {
		sub.TimeoutMS = max(1, int(time.Until(dl).Milliseconds()))
	}
	env := e.Run(ctx, sub)
	if len(env.Artifact.ValidationErrors) > 0 {
		return fail(CodeValidation, IssueText(env.Artifact.ValidationErrors))
	}
	if len(env.Artifact.Steps) == 0 {
		msg := "the call did not run"
		if len(env.Artifact.Errors) > 0 {
			msg = env.Artifact.Errors[0].Message
		}
		return fail(CodeToolError, msg)
	}
	*rec = *env.Artifact.Steps[0]
	if rec.Error != nil {
		rec.Error.StepID = id
	}
	return rec
}

// IssueText describes issues in one line for a model: what is wrong with
// its call, and how to fix it.
func IssueText(issues []*Issue) string {
	parts := make([]string, len(issues))
	for i, is := range issues {
		parts[i] = is.Error() + " [" + string(is.Code) + "]"
	}
	return "invalid call: " + strings.Join(parts, "; ")
}
