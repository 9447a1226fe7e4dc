package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Handoff. A tool that runs a model's tool loop (an agent) hands the
// client-final calls of a turn to the run that called it: it answers with
// a registry.Handoff (the calls and the loop's state), the step waits for
// the client like a client tool's step (one pending call each), and the
// loop's state is kept with the run's pause (LoopPause). A resume brings
// the step the client's results in registry.CallRequest.Continue, and the
// loop goes on from its state: the pause of a plan step and of a loop's
// turn is one mechanism.

// ClientSide is what a tool step's loop needs to hand calls to the
// client of its run: the tools the client runs, and how ask_user asks.
type ClientSide struct {
	// Tools are the request's client tools.
	Tools []registry.Tool
	// Final reports whether the client finishes tool t: a client tool, a
	// tool the configuration marks client-final, ask_user.
	Final func(t registry.Tool) bool
	// Elicit asks the user through the client, when it can; nil when
	// ask_user must be handed to the client.
	Elicit Elicit
}

// HandsOff reports whether a loop hands a call of t to the client: the
// client finishes t, and t is not ask_user that elicitation can ask.
func (cs *ClientSide) HandsOff(t registry.Tool) bool {
	return cs.Final(t) && !(t.Name == AskUserTool && cs.Elicit != nil)
}

type clientSideKey struct{}

// ClientSideFrom returns the client side of the run whose step ctx
// belongs to, if that run can pause for its client.
func ClientSideFrom(ctx context.Context) (*ClientSide, bool) {
	cs, ok := ctx.Value(clientSideKey{}).(*ClientSide)
	return cs, ok
}

// withClientSide puts the run's client side into ctx, for its steps: a
// run that cannot pause (a tool loop's call) leaves ctx as it is, so a
// loop under it hands off to the run that can, or fails with
// client_in_loop.
func (r *run) withClientSide(ctx context.Context) context.Context {
	if r.req.NoPause {
		return ctx
	}
	cs := &ClientSide{Final: r.clientFinal, Elicit: r.ps.elicit}
	if ct, ok := r.ps.tools.(*clientTools); ok {
		for _, n := range ct.names {
			if t, ok := ct.own[n]; ok {
				cs.Tools = append(cs.Tools, t)
			}
		}
	}
	return context.WithValue(ctx, clientSideKey{}, cs)
}

// loopPending makes the pending calls of step, whose tool's loop handed
// h to the client, and the loop's pause.
func (e *Engine) loopPending(step, tool string, h *registry.Handoff) ([]*PendingCall, *LoopPause) {
	lp := &LoopPause{State: h.State, Calls: map[string]string{}}
	pending := make([]*PendingCall, 0, len(h.Calls))
	for _, c := range h.Calls {
		id := e.opts.NewID()
		lp.Calls[id] = c.ID
		pending = append(pending, &PendingCall{CallID: id, Step: step, Agent: tool, Tool: c.Tool, Arguments: c.Arguments})
	}
	return pending, lp
}

// LoopStep is the id of the step of a paused child run, in its pause's
// one-step plan.
const LoopStep = "agent"

// Pause pauses the child run, whose loop handed h to the client when it
// ran for the call of tool with args that no run can pause for (the tool
// called directly): the run is kept as a one-step plan of that call,
// with the loop's state, until a resume (agent_orchestrate's, orchestra
// resume) brings the client's results, or its pause expires. The state
// counts against the run's bytes. It returns the pending calls and how
// to resume; when it fails, the child run is still to be finished.
func (c *ChildRun) Pause(ctx context.Context, tool string, args map[string]any, h *registry.Handoff) ([]*PendingCall, *ResumeHint, error) {
	r := c.r
	if fail := r.bytes.charge(LoopStep, int64(len(h.State))); fail != nil {
		return nil, nil, errors.New(fail.Message)
	}
	doc, err := json.Marshal(map[string]any{"steps": []any{map[string]any{"id": LoopStep, "tool": tool, "arguments": args}}})
	if err != nil {
		return nil, nil, fmt.Errorf("keeping the call of %s: %w", tool, err)
	}
	plan, issues := DecodePlan(doc)
	if len(issues) > 0 {
		return nil, nil, fmt.Errorf("keeping the call of %s: %s", tool, IssueText(issues))
	}
	pending, lp := r.e.loopPending(LoopStep, tool, h)
	expires := time.Now().Add(r.e.lim.PauseTTL)
	if err := r.e.pauses.Pause(ctx, r.execID, &Request{Plan: plan}, pending, map[string]*LoopPause{LoopStep: lp}, expires); err != nil {
		return nil, nil, fmt.Errorf("keeping the paused run %s: %w", r.execID, err)
	}
	r.m.Release() // the run is kept, not running: Finish is not called
	return pending, resumeHint(r.execID, expires, "<call_id>"), nil
}

// ClientFinal reports whether the client finishes catalog tool t: it is
// client-final (ask_user), or the configuration marks it so.
func (e *Engine) ClientFinal(t registry.Tool) bool {
	return t.Mode == registry.ClientFinal || e.opts.ClientFinal != nil && e.opts.ClientFinal(t.Name)
}

// ContinueChild takes up the child run execID, whose loop handed calls to
// the client, as [Engine.StartChild] starts one: it counts one agent run
// against ctx's budget, its steps and tool calls are numbered on from
// steps and calls (those it recorded before the handoff), and the hooks
// hear RunResumed.
func (e *Engine) ContinueChild(ctx context.Context, source, execID string, steps, calls int) (*ChildRun, context.Context, error) {
	c, err := e.newChild(ctx, source)
	if err != nil {
		return nil, ctx, err
	}
	r := c.r
	r.execID, r.info.ExecID = execID, execID
	if e.opts.Record != nil {
		r.recordURI = e.opts.Record(execID)
	}
	c.offset, c.calls = steps, calls
	if id, _ := toolcontext.ExecID(ctx); id == execID {
		// The child run paused itself (an agent called directly), and
		// its resume runs under its exec id: the steps are that run's,
		// and it begins and ends them.
		c.inline = true
		r.hooks = &Hooks{StepStarted: r.hooks.StepStarted, StepEnded: r.hooks.StepEnded}
	}
	callHook(r, "RunResumed", r.hooks.RunResumed, RunResumedInfo{Run: r.info, At: r.started})
	ctx = toolcontext.WithExecID(ctx, r.execID)
	return c, toolcontext.WithBudget(ctx, r.budget), nil
}

// Counts returns how many steps and tool calls the child run recorded,
// those before its handoff included.
func (c *ChildRun) Counts() (steps, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset + len(c.steps), c.calls
}

// FallbackStep is the step that the pending calls of a paused reactive
// fallback belong to: the run's planner's loop.
const FallbackStep = "fallback"

// PauseFallback pauses the run of the fallback c makes steps for (see
// [Fallback]), whose loop handed h to the client: the run waits
// (awaiting_client) with one pending call each, the loop's state is kept
// with its pause (counted against the run's bytes), and a resume goes on
// with the loop through the engine's [Fallback].Resume. It ends c as
// Finish does and returns the envelope; a pause that cannot be kept fails
// the run.
func (c *ChildRun) PauseFallback(ctx context.Context, h *registry.Handoff, edit func(*Artifact)) *Envelope {
	r := c.r
	if !c.fallback {
		return c.FinishWith(StatusFailed, "", edit, &Error{Code: CodeClientInLoop, Message: "only a planner's fallback pauses its run this way"})
	}
	if fail := r.bytes.charge(FallbackStep, int64(len(h.State))); fail != nil {
		return c.FinishWith(StatusFailed, "", edit, fail)
	}
	pending, lp := r.e.loopPending(FallbackStep, "", h)
	expires := time.Now().Add(r.e.lim.PauseTTL)
	req := &Request{Prompt: r.req.Prompt, Context: r.req.Context, Fallback: r.req.Fallback, Bindings: r.req.Bindings,
		TimeoutMS: r.req.TimeoutMS, MaxParallel: r.req.MaxParallel, ClientTools: r.req.ClientTools}
	if err := r.e.pauses.Pause(r.fireCtx, r.execID, req, pending, map[string]*LoopPause{FallbackStep: lp}, expires); err != nil {
		r.e.log.Error("keeping a paused run", "exec_id", r.execID, "err", err)
		return c.FinishWith(StatusFailed, "", edit, &Error{Code: CodePauseExpired, Message: "the paused run could not be kept, so it cannot be resumed: " + err.Error()})
	}
	defer r.m.Release()
	r.fire(fsm.EventPause)
	env := c.envelope(StatusAwaitingClient, "", edit, nil)
	env.Artifact.Pending = pending
	env.Artifact.Resume = resumeHint(r.execID, expires, "<call_id>")
	callHook(r, "RunPaused", r.hooks.RunPaused, RunPausedInfo{Run: r.info, At: time.Now(), Envelope: env})
	return env
}

// NumberFrom numbers the child run's steps and tool calls on from steps
// and calls: those its loop recorded before a pause.
func (c *ChildRun) NumberFrom(steps, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset, c.calls = steps, calls
}

// resumeFallback goes on with the run's fallback loop, paused for the
// client, with cont: the loop's state and the client's results. Resume
// made sure the engine has a Fallback to go on with.
func (r *run) resumeFallback(ctx context.Context, cont *registry.Continuation) *Envelope {
	r.fire(fsm.EventResume)
	c := r.fallbackRun()
	ctx = toolcontext.WithBudget(toolcontext.WithExecID(ctx, r.execID), r.budget)
	return r.e.fallback.Resume(r.withClientSide(ctx), c, r.req, cont)
}
