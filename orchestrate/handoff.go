package orchestrate

import (
	"context"

	"github.com/orchestra-mcp/orchestra/budget"
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
	parent, ok := toolcontext.BudgetFrom(ctx)
	if !ok {
		parent = e.mem.node
	}
	if err := parent.Spend(budget.AgentRuns, 1); err != nil {
		return nil, ctx, err
	}
	plan := &Plan{Type: "tool_calls", Schedule: ScheduleSequential, Steps: []*Step{}}
	ce := e.With(RunOptions{Source: source})
	ce.principal = true
	r := ce.newRun(ctx, &Request{Plan: plan})
	r.plan = plan
	r.execID, r.info.ExecID = execID, execID
	if e.opts.Record != nil {
		r.recordURI = e.opts.Record(execID)
	}
	quiet := *e
	quiet.hooks = noHooks
	c := &ChildRun{r: r, quiet: &quiet, plan: plan, offset: steps, calls: calls}
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
