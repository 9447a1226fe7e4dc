package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
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
	ctx, cancel := context.WithTimeout(ctx, p.planTimeout(req))
	defer cancel()

	tool := p.Tool()
	defs := make([]llm.ToolDef, 0, len(tool.Tools))
	for _, name := range tool.Tools {
		defs = append(defs, llm.ToolDef{Name: name, Description: tool.descs[name], Parameters: tool.inputs[name]})
	}
	maxSteps := p.opts.Engine.Limits().MaxSteps
	msgs := []llm.Message{{Role: llm.RoleUser, Content: userMessage(req.Prompt, req.Bindings) +
		"\n\n(Planning failed: " + truncate(perr.Error(), 500) + ")"}}
	var (
		steps    []*orchestrate.StepRecord
		answer   string
		finished bool
		loopErr  *orchestrate.Error
	)
	for turn := 0; turn <= p.opts.MaxToolSteps; turn++ {
		r := &llm.Request{System: reactiveSystem, Messages: msgs, Tools: defs, ToolChoice: llm.ToolChoiceAuto}
		last := turn == p.opts.MaxToolSteps || len(steps) >= maxSteps || len(defs) == 0
		if last {
			r.ToolChoice = llm.ToolChoiceNone
			if len(defs) == 0 {
				r.Tools, r.ToolChoice = nil, ""
			}
			if turn > 0 {
				r.Messages = append(slices.Clone(msgs), llm.Message{Role: llm.RoleUser, Content: "No more tool calls are allowed: answer now from the results so far."})
			}
		}
		resp, err := p.generate(ctx, info, r)
		if err != nil {
			code := orchestrate.CodePlannerFailed
			if errors.Is(timeoutError(ctx, err), context.DeadlineExceeded) {
				code = orchestrate.CodeTimeout
			}
			loopErr = &orchestrate.Error{Code: code, Message: "reactive fallback: " + err.Error()}
			break
		}
		if len(resp.ToolCalls) == 0 || last {
			answer = strings.TrimSpace(resp.Text)
			finished = len(resp.ToolCalls) == 0 || answer != ""
			if !finished {
				loopErr = &orchestrate.Error{Code: orchestrate.CodePlannerFailed,
					Message: fmt.Sprintf("reactive fallback: the model still called tools after %d turns (max_tool_steps) and gave no answer", turn)}
			}
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			if len(steps) >= maxSteps {
				msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID,
					Content: fmt.Sprintf("error: not run: the limit of %d tool calls was reached", maxSteps)})
				continue
			}
			rec, content := p.callTool(ctx, req, tool, tc, len(steps))
			steps = append(steps, rec)
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: content})
		}
	}

	env := *failed
	a := &orchestrate.Artifact{
		Plan:             &orchestrate.Plan{Type: "tool_calls", Schedule: orchestrate.ScheduleSequential, Reasoning: "reactive fallback: " + truncate(perr.Error(), 500), Steps: []*orchestrate.Step{}},
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
	fail := func(code, msg string) (*orchestrate.StepRecord, string) {
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
	rec.Arguments = args
	doc, err := json.Marshal(map[string]any{"steps": []any{map[string]any{"id": id, "tool": tc.Name, "arguments": args}}})
	if err != nil {
		return fail(orchestrate.CodeInvalidArguments, err.Error())
	}
	plan, issues := orchestrate.DecodePlan(doc)
	if len(issues) > 0 {
		return fail(orchestrate.CodeValidation, issueText(issues))
	}
	sub := &orchestrate.Request{Plan: plan, Bindings: req.Bindings, MaxParallel: req.MaxParallel, NoPause: true}
	if dl, ok := ctx.Deadline(); ok {
		sub.TimeoutMS = max(1, int(time.Until(dl).Milliseconds()))
	}
	env := p.opts.Engine.Run(ctx, sub)
	if len(env.Artifact.ValidationErrors) > 0 {
		return fail(orchestrate.CodeValidation, issueText(env.Artifact.ValidationErrors))
	}
	if len(env.Artifact.Steps) == 0 {
		msg := "the call did not run"
		if len(env.Artifact.Errors) > 0 {
			msg = env.Artifact.Errors[0].Message
		}
		return fail(orchestrate.CodeToolError, msg)
	}
	*rec = *env.Artifact.Steps[0]
	rec.ID, rec.Index, rec.Path = id, n, fmt.Sprintf("plan.steps[%d]", n)
	if rec.Error != nil {
		rec.Error.StepID = id
		return rec, "error: " + rec.Error.Code + ": " + rec.Error.Message
	}
	out, err := json.Marshal(rec.Output)
	if err != nil {
		return rec, "(the output could not be encoded)"
	}
	return rec, truncate(string(out), maxToolResultBytes)
}

func issueText(issues []*orchestrate.Issue) string {
	parts := make([]string, len(issues))
	for i, is := range issues {
		parts[i] = is.Error() + " [" + is.Code + "]"
	}
	return "invalid call: " + strings.Join(parts, "; ")
}
