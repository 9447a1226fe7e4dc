package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
	"github.com/orchestra-mcp/orchestra/toolloop"
)

const reactiveSystem = `You are orchestra. No plan could be made for the user's goal, so reach it step by step: call the tools you need, one or a few at a time, read their results, and call more if needed. When you have what the goal needs, answer the user in plain text without calling a tool. Do not invent results.`

// maxToolResultBytes caps a tool result sent back to the model.
const maxToolResultBytes = 32 << 10

// reactive runs the reactive fallback: a bounded tool loop with the same
// model, in the place of the plan the planner could not make. Every call is
// validated against the tool's input schema and run by the engine under
// the same limits and timeouts, as a step of the run (c), which ends as the
// loop does. A turn that asks for client-final tools pauses the run for
// the client (handoff), and resumeReactive goes on with the loop.
func (p *Planner) reactive(ctx context.Context, req *orchestrate.Request, res *Result, c *orchestrate.ChildRun, perr error) *orchestrate.Envelope {
	st := &fallbackState{Planner: &orchestrate.PlannerInfo{}, Reasoning: "reactive fallback: " + textcut.Truncate(perr.Error(), 500), Warnings: res.Issues}
	if res != nil && res.Info != nil {
		*st.Planner = *res.Info
	}
	st.Planner.Fallback = FallbackReactive
	ctx, cancel := context.WithTimeout(toolcontext.WithPlannerDisabled(ctx), p.planTimeout(ctx, req))
	defer cancel()
	loop := p.reactiveLoop(ctx, c, st)
	out := loop.Run(ctx, []llm.Message{{Role: llm.RoleUser, Content: userMessage(req.Prompt, req.Bindings) +
		"\n\n(Planning failed: " + textcut.Truncate(perr.Error(), 500) + ")"}})
	return p.endReactive(ctx, req, c, st, out)
}

// fallbackState is what a reactive fallback keeps of its paused loop.
type fallbackState struct {
	Loop toolloop.State `json:"loop"`
	// Steps and Calls are the run's records so far.
	Steps int `json:"steps"`
	Calls int `json:"calls"`
	// Failures counts the loop's failed tool calls so far.
	Failures int `json:"failures,omitempty"`
	// Planner, Reasoning and Warnings are what the run's artifact says
	// of its planner.
	Planner   *orchestrate.PlannerInfo `json:"planner"`
	Reasoning string                   `json:"reasoning"`
	Warnings  []*orchestrate.Issue     `json:"warnings,omitempty"`
	// RemainingMS is what was left of the loop's deadline.
	RemainingMS int64 `json:"remaining_ms,omitempty"`
}

// reactiveLoop is the fallback's loop, its steps those of c: the
// planner's tools, with the client's (the request's client tools, and
// ask_user when the client cannot be asked through elicitation) handed to
// it. It counts failed calls in st.
func (p *Planner) reactiveLoop(ctx context.Context, c *orchestrate.ChildRun, st *fallbackState) *toolloop.Loop {
	tool := p.narrowedTo(ctx).Tool()
	defs := make([]llm.ToolDef, 0, len(tool.Tools))
	for _, name := range tool.Tools {
		defs = append(defs, llm.ToolDef{Name: name, Description: tool.descs[name], Parameters: tool.inputs[name]})
	}
	loop := &toolloop.Loop{
		Generate: func(ctx context.Context, r *llm.Request) (*llm.Response, error) {
			return p.generate(ctx, st.Planner, r)
		},
		System:   reactiveSystem,
		Tools:    defs,
		MaxTurns: p.opts.MaxToolSteps,
		MaxCalls: p.opts.Engine.Limits().MaxSteps,
		Call: func(ctx context.Context, tc llm.ToolCall) string {
			rec, content := p.callTool(ctx, c, tool, tc)
			if rec.Error != nil {
				st.Failures++
			}
			return content
		},
	}
	cs, ok := orchestrate.ClientSideFrom(ctx)
	if !ok {
		return loop
	}
	byName := map[string]registry.Tool{}
	if p.opts.Catalog != nil {
		for _, t := range p.opts.Catalog.List() {
			if _, offered := tool.inputs[t.Name]; offered {
				byName[t.Name] = t
			}
		}
	}
	for _, t := range cs.Tools {
		if _, dup := byName[t.Name]; !dup {
			byName[t.Name] = t
			loop.Tools = append(loop.Tools, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: toolloop.Parameters(t.InputSchema)})
		}
	}
	loop.Handoff = toolloop.ClientHandoff(c, byName, cs.HandsOff)
	return loop
}

// endReactive ends the fallback's run as its loop came out: paused for
// the client, or finished with its answer.
func (p *Planner) endReactive(ctx context.Context, req *orchestrate.Request, c *orchestrate.ChildRun, st *fallbackState, out *toolloop.Result) *orchestrate.Envelope {
	edit := func(a *orchestrate.Artifact) {
		a.Plan.Reasoning = st.Reasoning
		a.Warnings = st.Warnings
		a.Planner = st.Planner
		maps.Copy(a.Bindings, req.Bindings)
	}
	if out.Paused != nil {
		st.Loop = *out.Paused
		st.Steps, st.Calls = c.Counts()
		if dl, ok := ctx.Deadline(); ok {
			st.RemainingMS = max(1, time.Until(dl).Milliseconds())
		}
		state, err := json.Marshal(st)
		if err != nil {
			return c.FinishWith(orchestrate.StatusFailed, "", edit, &orchestrate.Error{Code: orchestrate.CodePlannerFailed, Message: "keeping the reactive fallback's loop: " + err.Error()})
		}
		return c.PauseFallback(ctx, out.Paused.Handoff(state), edit)
	}
	var loopErr *orchestrate.Error
	if e := out.Err; e != nil {
		code := orchestrate.CodePlannerFailed
		if e.Code == orchestrate.CodeTimeout {
			code = orchestrate.CodeTimeout
		}
		loopErr = &orchestrate.Error{Code: code, Message: "reactive fallback: " + e.Message}
	}
	status := orchestrate.StatusSuccess
	switch {
	case out.Err != nil:
		status = orchestrate.StatusFailed
	case st.Failures > 0:
		status = orchestrate.StatusPartial
	}
	return c.FinishWith(status, out.Answer, edit, loopErr)
}

// resumeReactive goes on with a reactive fallback that paused its run for
// the client: cont holds its state and the client's results. No model
// turn or tool call of before the pause runs again.
func (p *Planner) resumeReactive(ctx context.Context, c *orchestrate.ChildRun, req *orchestrate.Request, cont *registry.Continuation) *orchestrate.Envelope {
	st := &fallbackState{}
	if err := json.Unmarshal(cont.State, st); err != nil || st.Planner == nil {
		return c.Finish(orchestrate.StatusFailed, "", &orchestrate.Error{Code: orchestrate.CodeNotResumable, Message: "the reactive fallback's paused loop does not decode; start the run again"})
	}
	c.NumberFrom(st.Steps, st.Calls)
	ctx = toolcontext.WithPlannerDisabled(ctx)
	if st.RemainingMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(st.RemainingMS)*time.Millisecond)
		defer cancel()
	}
	loop := p.reactiveLoop(ctx, c, st)
	out, err := loop.Resume(ctx, &st.Loop, toolloop.ClientResults(c, &st.Loop, cont.Results, maxToolResultBytes))
	if err != nil {
		return c.Finish(orchestrate.StatusFailed, "", &orchestrate.Error{Code: orchestrate.CodeNotResumable, Message: "reactive fallback: " + err.Error()})
	}
	return p.endReactive(ctx, req, c, st, out)
}

// ResumeFallback is what goes on with a run paused in this planner's
// reactive fallback, for [orchestrate.Engine.WithFallback].
func (p *Planner) ResumeFallback() *orchestrate.Fallback {
	return &orchestrate.Fallback{Resume: p.resumeReactive}
}

// callTool runs one call of the reactive loop as a step of the run, and
// returns its record and what to tell the model. A call of a tool the
// loop does not offer, or with arguments that are no object, is refused
// without running.
func (p *Planner) callTool(ctx context.Context, c *orchestrate.ChildRun, tool *Tool, tc llm.ToolCall) (*orchestrate.StepRecord, string) {
	refuse := func(code orchestrate.Code, msg string) (*orchestrate.StepRecord, string) {
		now := time.Now()
		rec := &orchestrate.StepRecord{Type: "tool", Tool: tc.Name, Status: orchestrate.StatusFailed, StartedAt: &now,
			Error: &orchestrate.Error{Code: code, Message: msg}}
		c.Step("refused", rec)
		return rec, "error: " + msg
	}
	if _, ok := tool.inputs[tc.Name]; !ok {
		return refuse(orchestrate.CodeUnknownTool, fmt.Sprintf("unknown tool %q; the tools are %s", tc.Name, strings.Join(tool.Tools, ", ")))
	}
	var args map[string]any
	if err := llm.DecodeArguments(tc.Arguments, &args); err != nil || args == nil {
		return refuse(orchestrate.CodeInvalidArguments, fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name))
	}
	rec := c.Call(ctx, tc.Name, args)
	// A partial answer (an agent's) is a result: the model reads what it
	// has and what it lacks.
	if rec.Error != nil && rec.Status != orchestrate.StatusPartial {
		if rec.Error.Code == orchestrate.CodeValidation {
			return rec, "error: " + rec.Error.Message
		}
		return rec, "error: " + string(rec.Error.Code) + ": " + rec.Error.Message
	}
	out, err := json.Marshal(rec.Output)
	if err != nil {
		return rec, "(the output could not be encoded)"
	}
	return rec, textcut.Truncate(string(out), maxToolResultBytes)
}
