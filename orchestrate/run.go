package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/internal/plural"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// run is one orchestration. Its phases: validation (after the planner on
// the prompt path), scheduling (schedule.go) of steps (step.go) and groups
// (group.go), and the envelope (envelope.go), made from a snapshot of the
// run once every step has ended.
type run struct {
	e         *Engine
	hooks     *Hooks
	req       *Request
	lim       Limits
	m         *fsm.Machine
	fireCtx   context.Context // the run's context, never cancelled, for the state machine
	execID    string
	ids       toolcontext.IDs
	depth     int
	info      *RunInfo
	started   time.Time
	recordURI string // _metadata.record

	// Set before any step starts; only read while steps run.
	plan     *Plan
	valid    *Validation
	planInfo *PlannerInfo
	fallback *Fallback // makes the steps when the planner fails; nil: none
	tmpl     templateCache
	names    map[string]*Step // ids and result keys
	deps     map[*Step][]*Step
	sem      *semaphore.Weighted

	// stopped is the one signal to stop dispatching: set when a step
	// halts the plan, the plan's timeout passes or the caller cancels.
	// Steps in flight go on (cancellation reaches them through their
	// context); no new step or group child starts.
	stopped atomic.Bool
	// inflight counts the goroutines of the top-level steps.
	inflight sync.WaitGroup

	mu       sync.Mutex // guards the fields below and the records' contents
	records  map[*Step]*StepRecord
	outputs  map[*Step]any
	errors   []*Error
	internal []error // the engine's own failures; see RunFinishedInfo.Err

	// budget is the run's node of its request's budget tree: its tool
	// calls, bytes and deadline draw from it, and so from every node
	// above it; the tools it may call are the path's.
	budget *budget.Budget
	bytes  runBytes // what the run's outputs, arguments and records hold
	answer *answer  // set when a handler answers with this run's envelope

	limitHit   atomic.Bool // a limit stopped the run (loop.go)
	limitFired bool        // limit_exceeded was fired; the scheduler's alone

	ps pauseState // client tools, pauses and resumes (pause.go, resume.go)

	stream *Stream // the steps started while the planner wrote the plan (stream.go)
}

// fire moves the state machine with event. The machine refuses an event
// its state does not allow: that is a bug of the executor, logged and kept
// for RunFinishedInfo.Err, where the tests see it.
func (r *run) fire(event string) {
	if err := r.m.Fire(r.fireCtx, event, nil); err != nil {
		r.e.log.Error("state machine", "exec_id", r.execID, "event", event, "state", r.m.Current(), "err", err)
		r.internalError(err)
	}
}

func (r *run) internalError(err error) {
	r.mu.Lock()
	r.internal = append(r.internal, err)
	r.mu.Unlock()
}

func (r *run) addError(e *Error) {
	r.mu.Lock()
	r.errors = append(r.errors, e)
	r.mu.Unlock()
}

// stop stops dispatching and reports whether this call did: only the first
// reason to stop counts (a plan that halted does not also time out).
func (r *run) stop() bool { return r.stopped.CompareAndSwap(false, true) }

// dispatching reports whether steps may still start.
func (r *run) dispatching() bool { return !r.stopped.Load() }

// stopFor stops dispatching because the plan's context ended: the caller
// cancelled (ctx, the caller's context, ended too) or the plan's timeout
// passed.
func (r *run) stopFor(ctx context.Context) {
	if !r.stop() {
		return
	}
	if ctx.Err() != nil {
		r.addError(&Error{Code: CodeCancelled, Message: "the caller cancelled the orchestration"})
		r.fire(fsm.EventCancelled)
		return
	}
	r.addError(&Error{Code: CodeTimeout, Message: r.timeoutMessage()})
	r.fire(fsm.EventTimeout)
}

// timeoutMessage says which deadline stopped the run: its own timeout, or
// its request's, which planning and the runs before it had spent.
func (r *run) timeoutMessage() string {
	if dl, ok := r.budget.Deadline(); ok && dl.Before(r.started.Add(r.lim.PlanTimeout)) {
		return "the plan did not finish before the deadline of the request it runs for (its timeout_ms or limits.plan_timeout, which planning and the work before it had spent in part); raise timeout_ms or make the plan shorter"
	}
	return fmt.Sprintf("the plan did not finish within its timeout of %s; raise timeout_ms or make the plan shorter", r.lim.PlanTimeout)
}

// begin tells the hooks that the run started.
func (r *run) begin(planning bool) {
	if r.ps.resumed {
		return // RunResumed told the hooks
	}
	callHook(r, "RunStarted", r.hooks.RunStarted, RunStartedInfo{Run: r.info, At: r.started, Planning: planning})
}

// run drives the orchestration from start to envelope.
func (r *run) run(ctx context.Context, planner PlanFunc) (env *Envelope) {
	defer func() {
		if v := recover(); v != nil {
			r.e.log.Error("orchestration panicked", "exec_id", r.execID, "panic", v, "stack", string(debug.Stack()))
			r.addError(&Error{Code: CodePanic, Message: fmt.Sprintf("internal error: %v", v)})
			r.stop()
			if !r.m.Done() {
				r.fire(fsm.EventPanic)
			}
			// The plan's context is cancelled by now: the steps in flight
			// return; then every step that has not ended ends (a plan
			// that got no further than validation lists its steps).
			r.inflight.Wait()
			if r.plan != nil && len(r.records) == 0 && !r.oversized() {
				r.buildRecords()
			}
			r.endAll()
			env = r.finish()
		}
	}()
	r.begin(planner != nil)
	if r.depth >= r.lim.MaxDepth {
		r.errors = append(r.errors, &Error{Code: CodeDepthExceeded, Message: fmt.Sprintf("orchestration depth %d reached the limit of %d: a plan's tool may not start another orchestration this deep", r.depth+1, r.lim.MaxDepth)})
		r.fire(fsm.EventValidationFailed)
		return r.finish()
	}
	if planner != nil {
		r.fire(fsm.EventStartPlan)
		if !r.req.DryRun { // a dry run runs nothing, early or not
			r.stream = r.newStream(ctx)
		}
		plan, info, issues, err := planner(context.WithValue(ctx, streamKey{}, r.stream))
		r.planInfo = info
		if plan != nil {
			r.plan = plan
		}
		if err != nil || len(issues) > 0 {
			if issues == nil {
				issues = []*Issue{}
			}
			r.valid = &Validation{Errors: issues, Warnings: []*Issue{}}
			if err != nil {
				r.errors = append(r.errors, &Error{Code: plannerCode(ctx, err), Message: err.Error()})
			}
			r.stream.Reject("planning failed")
			if err != nil && r.fallback != nil && r.fallback.Applies(err) {
				return r.runFallback(ctx, err)
			}
			return r.notRun()
		}
		if !r.validate() {
			r.errors = append(r.errors, &Error{Code: CodeValidation, Message: "the planner's plan is invalid; see validation_errors"})
			r.stream.Reject("the plan failed validation")
			return r.notRun()
		}
		r.stream.accept()
		r.fire(fsm.EventPlannerFinished)
	} else {
		r.plan = r.req.Plan
		if r.plan == nil {
			r.errors = append(r.errors, &Error{Code: CodeInvalidRequest, Message: "the request has no plan; send {\"plan\": {\"steps\": [...]}}"})
			return r.notRun()
		}
		if !r.validate() {
			r.errors = append(r.errors, &Error{Code: CodeValidation, Message: fmt.Sprintf("the plan has %s; nothing ran", plural.Count(len(r.valid.Errors), "validation error"))})
			return r.notRun()
		}
		r.fire(r.startEvent())
	}
	r.info.Plan = r.plan
	r.info.Leaves = len(r.plan.Leaves())
	r.m.Grow(3*r.info.Leaves + 4) // about three events per step
	r.prepare()
	r.restore()
	if h := r.hooks.PlanReady; h != nil {
		callHook(r, "PlanReady", h, PlanReadyInfo{Run: r.info, At: time.Now(), Plan: r.plan, Warnings: r.valid.Warnings, Planner: r.planInfo})
	}
	if r.req.DryRun || r.plan.Type == "direct_response" {
		r.fire(fsm.EventDispatch)
		r.endAll() // nothing runs
		r.fire(fsm.EventFinished)
		return r.finish()
	}

	// The plan's deadline is its node's: its own timeout from its start,
	// or what is left of its request's, whichever comes first.
	deadline, _ := r.budget.Deadline()
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pctx = toolcontext.WithDepth(pctx, r.depth+1)
	pctx = toolcontext.WithExecID(pctx, r.execID)
	pctx = toolcontext.WithBudget(pctx, r.budget)
	pctx = r.withClientSide(pctx)
	if !r.ps.resumed && !r.req.NoPause { // a tool loop's call is not a run of its own to resume
		r.e.pauses.Keep(r.fireCtx, r.execID, r.checkpointRequest())
	}
	r.schedule(ctx, pctx)
	if r.m.Current() == fsm.StateAwaitingClient {
		return r.pause()
	}
	return r.finish()
}

// validate validates the plan with the run's limits and bindings.
func (r *run) validate() bool {
	r.tmpl = newTemplateCache(r.plan)
	r.valid = validateCached(r.plan, r.ps.tools, r.lim, r.req.Bindings, r.e.opts.Forbidden, r.tmpl)
	r.valid.Errors = append(r.valid.Errors, r.ps.issues...)
	if r.req.NoPause {
		r.valid.Errors = append(r.valid.Errors, r.noPauseIssues()...)
	} else {
		r.valid.Errors = append(r.valid.Errors, r.loopIssues()...)
	}
	return r.valid.OK()
}

func plannerCode(ctx context.Context, err error) Code {
	var ex *budget.Exceeded
	switch {
	case errors.As(err, &ex):
		return CodeLimitExceeded
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return CodeCancelled
	}
	return CodePlannerFailed
}

// notRun ends a run whose plan will not run: the planner failed, or the
// plan did not validate. The plan's steps, if it has any and is not too
// large to list, end as skipped.
func (r *run) notRun() *Envelope {
	r.fire(fsm.EventValidationFailed)
	if r.plan != nil && !r.oversized() {
		r.buildRecords()
		r.endAll()
	}
	return r.finish()
}

// reject ends a run whose request could not be decoded, with issues as its
// validation errors.
func (r *run) reject(issues []*Issue) *Envelope {
	r.begin(false)
	r.valid = &Validation{Errors: issues, Warnings: []*Issue{}}
	code := CodeValidation
	if len(issues) == 1 {
		code = issues[0].Code
	}
	r.errors = append(r.errors, &Error{Code: code, Message: "the request was rejected; see validation_errors"})
	r.fire(fsm.EventValidationFailed)
	return r.finish()
}

// oversized reports whether the plan is over max_steps or max_nesting: it
// is then neither echoed nor listed step by step, for a 10,000-step plan,
// or groups nested 400 deep (whose indented text grows with the square of
// the depth), would make a response of megabytes that says only that the
// plan is too large.
func (r *run) oversized() bool {
	if len(r.plan.Leaves()) > r.lim.MaxSteps {
		return true
	}
	for _, s := range r.plan.All() {
		if (s.IsGroup() || s.IsLoop()) && s.depth >= r.lim.MaxNesting {
			return true
		}
	}
	return false
}

// finish builds the envelope, tells the hooks, and releases the state
// machine: nothing is fired after it.
func (r *run) finish() *Envelope {
	defer r.bytes.releaseAll(r.answer)
	r.endStream()
	s := r.snapshot()
	r.finals(s)
	env := s.envelope()
	r.mu.Lock()
	err := errors.Join(r.internal...)
	r.mu.Unlock()
	callHook(r, "RunFinished", r.hooks.RunFinished, RunFinishedInfo{Run: r.info, At: time.Now(), Envelope: env, Err: err})
	r.m.Release()
	return env
}

// snapshot takes what the envelope is made of. Every step has ended by
// now, so nothing writes to the records any more: the envelope may own
// them.
func (r *run) snapshot() *snapshot {
	completed := r.m.Current() == fsm.StateCompleted
	r.mu.Lock()
	defer r.mu.Unlock()
	// The run's own errors (a planner's may quote a credential) and the
	// validation issues are redacted here; a step's error was when it
	// ended.
	for _, e := range r.errors {
		r.redactError(e)
	}
	if r.valid != nil {
		r.redactIssues(r.valid.Errors)
	}
	s := &snapshot{
		plan:      r.plan,
		bindings:  r.req.Bindings,
		errors:    append([]*Error(nil), r.errors...),
		valid:     r.valid,
		planner:   r.planInfo,
		completed: completed,
		dryRun:    r.req.DryRun,
		full:      r.full(),
		lim:       r.lim,
		meta: Metadata{
			ContextID:  r.ids.ContextID,
			RequestID:  r.ids.RequestID,
			TraceID:    r.ids.TraceID,
			UserID:     r.ids.UserID,
			ToolName:   r.e.opts.ToolName,
			ExecutedAt: r.started.UTC().Format(time.RFC3339Nano),
			DurationMS: time.Since(r.started).Milliseconds(),
			Depth:      r.depth,
			ExecID:     r.execID,
			Record:     r.recordURI,
		},
	}
	if r.plan != nil {
		s.oversized = r.oversized()
		for _, st := range r.plan.Steps {
			if rec, ok := r.records[st]; ok {
				s.steps = append(s.steps, rec)
			}
		}
		for st, out := range r.outputs {
			if st.ResultKey != "" {
				if s.results == nil {
					s.results = map[string]any{}
				}
				s.results[st.ResultKey] = out
			}
		}
	}
	return s
}
