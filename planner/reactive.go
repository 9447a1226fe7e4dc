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
// model, in the place of the plan the planner could not make. Every call is
// validated against the tool's input schema and run by the engine under
// the same limits and timeouts, as a step of the run (c), which ends as the
// loop does.
func (p *Planner) reactive(ctx context.Context, req *orchestrate.Request, res *Result, c *orchestrate.ChildRun, perr error) *orchestrate.Envelope {
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
	failures := 0
	loop := &toolloop.Loop{
		Generate: func(ctx context.Context, r *llm.Request) (*llm.Response, error) { return p.generate(ctx, info, r) },
		System:   reactiveSystem,
		Tools:    defs,
		MaxTurns: p.opts.MaxToolSteps,
		MaxCalls: p.opts.Engine.Limits().MaxSteps,
		Call: func(ctx context.Context, tc llm.ToolCall) string {
			rec, content := p.callTool(ctx, c, tool, tc)
			if rec.Error != nil {
				failures++
			}
			return content
		},
	}
	out := loop.Run(ctx, []llm.Message{{Role: llm.RoleUser, Content: userMessage(req.Prompt, req.Bindings) +
		"\n\n(Planning failed: " + textcut.Truncate(perr.Error(), 500) + ")"}})
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
	case failures > 0:
		status = orchestrate.StatusPartial
	}
	return c.FinishWith(status, out.Answer, func(a *orchestrate.Artifact) {
		a.Plan.Reasoning = "reactive fallback: " + textcut.Truncate(perr.Error(), 500)
		a.Warnings = res.Issues
		a.Planner = info
		maps.Copy(a.Bindings, req.Bindings)
	}, loopErr)
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
