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
	"github.com/orchestra-mcp/orchestra/toolcontext"
	"github.com/orchestra-mcp/orchestra/toolloop"
)

const reactiveSystem = `You are orchestra. No plan could be made for the user's goal, so reach it step by step: call the tools you need, one or a few at a time, read their results, and call more if needed. When you have what the goal needs, answer the user in plain text without calling a tool. Do not invent results.`

// maxToolResultBytes caps a tool result sent back to the model.
const maxToolResultBytes = 32 << 10

// reactive runs the reactive fallback: a bounded tool loop with the same
// model. Every call is validated against the tool's input schema and run
// by the engine under the same limits and timeouts; the calls are the
// steps of the returned envelope, which replaces failed.
func (p *Planner) reactive(ctx context.Context, req *orchestrate.Request, res *Result, failed *orchestrate.Envelope, perr error) *orchestrate.Envelope {
	start := time.Now()
	info := &orchestrate.PlannerInfo{}
	if res != nil && res.Info != nil {
		*info = *res.Info
	}
	info.Fallback = FallbackReactive
	ctx = toolcontext.WithPlannerDisabled(ctx)
	ctx, cancel := context.WithTimeout(ctx, p.planTimeout(ctx, req))
	defer cancel()

	tool := p.narrowedTo(ctx).Tool()
	defs := make([]llm.ToolDef, 0, len(tool.Tools))
	for _, name := range tool.Tools {
		defs = append(defs, llm.ToolDef{Name: name, Description: tool.descs[name], Parameters: tool.inputs[name]})
	}
	var steps []*orchestrate.StepRecord
	loop := &toolloop.Loop{
		Generate: func(ctx context.Context, r *llm.Request) (*llm.Response, error) { return p.generate(ctx, info, r) },
		System:   reactiveSystem,
		Tools:    defs,
		MaxTurns: p.opts.MaxToolSteps,
		MaxCalls: p.opts.Engine.Limits().MaxSteps,
		Call: func(ctx context.Context, tc llm.ToolCall) string {
			rec, content := p.callTool(ctx, req, tool, tc, len(steps))
			steps = append(steps, rec)
			return content
		},
	}
	out := loop.Run(ctx, []llm.Message{{Role: llm.RoleUser, Content: userMessage(req.Prompt, req.Bindings) +
		"\n\n(Planning failed: " + textcut.Truncate(perr.Error(), 500) + ")"}})
	answer, finished := out.Answer, out.Err == nil
	var loopErr *orchestrate.Error
	if e := out.Err; e != nil {
		code := orchestrate.CodePlannerFailed
		if e.Code == orchestrate.CodeTimeout {
			code = orchestrate.CodeTimeout
		}
		loopErr = &orchestrate.Error{Code: code, Message: "reactive fallback: " + e.Message}
	}

	env := *failed
	a := &orchestrate.Artifact{
		Plan:             &orchestrate.Plan{Type: "tool_calls", Schedule: orchestrate.ScheduleSequential, Reasoning: "reactive fallback: " + textcut.Truncate(perr.Error(), 500), Steps: []*orchestrate.Step{}},
		Steps:            []*orchestrate.StepRecord{},
		Bindings:         map[string]any{},
		Errors:           []*orchestrate.Error{},
		ValidationErrors: []*orchestrate.Issue{},
		Warnings:         res.Issues,
		Planner:          info,
		Response:         answer,
	}
	maps.Copy(a.Bindings, req.Bindings)
	failures := 0
	for _, rec := range steps {
		a.Steps = append(a.Steps, rec)
		a.Plan.Steps = append(a.Plan.Steps, &orchestrate.Step{ID: rec.ID, Tool: rec.Tool, Arguments: rec.Arguments})
		if rec.Error != nil {
			failures++
			a.Errors = append(a.Errors, rec.Error)
		}
	}
	if loopErr != nil {
		a.Errors = append(a.Errors, loopErr)
	}
	switch {
	case !finished:
		a.Status = orchestrate.StatusFailed
	case failures > 0:
		a.Status = orchestrate.StatusPartial
	default:
		a.Status = orchestrate.StatusSuccess
	}
	a.Success = a.Status == orchestrate.StatusSuccess
	env.Artifact = a
	env.Metadata.DurationMS += time.Since(start).Milliseconds()
	return &env
}

// callTool runs one call of the reactive loop as a one-step plan, and
// returns its record and what to tell the model.
func (p *Planner) callTool(ctx context.Context, req *orchestrate.Request, tool *Tool, tc llm.ToolCall, n int) (*orchestrate.StepRecord, string) {
	id := fmt.Sprintf("call_%d", n)
	rec := &orchestrate.StepRecord{ID: id, Index: n, Path: fmt.Sprintf("plan.steps[%d]", n), Type: "tool", Tool: tc.Name, Status: orchestrate.StatusFailed}
	fail := func(code orchestrate.Code, msg string) (*orchestrate.StepRecord, string) {
		rec.Error = &orchestrate.Error{StepID: id, Code: code, Message: msg}
		return rec, "error: " + msg
	}
	if _, ok := tool.inputs[tc.Name]; !ok {
		return fail(orchestrate.CodeUnknownTool, fmt.Sprintf("unknown tool %q; the tools are %s", tc.Name, strings.Join(tool.Tools, ", ")))
	}
	var args map[string]any
	if err := json.Unmarshal(tc.Arguments, &args); err != nil || args == nil {
		return fail(orchestrate.CodeInvalidArguments, fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name))
	}
	rec = p.opts.Engine.CallTool(ctx, id, tc.Name, args, req.Bindings)
	rec.ID, rec.Index, rec.Path = id, n, fmt.Sprintf("plan.steps[%d]", n)
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
