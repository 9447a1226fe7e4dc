package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// FallbackReactive is the request's fallback that runs a reactive tool loop
// when planning fails.
const FallbackReactive = "reactive"

// Run runs the prompt path of req: PLAN (in the state machine's
// planner_active), then the plan is validated and executed like any other,
// or, when planning fails and req asks for it, the reactive fallback runs.
//
// It returns an error only when the model must be asked in another round
// trip by the client ([llm.ErrInputRequired], from [llm.InputSampling]);
// every other outcome is in the envelope.
func (p *Planner) Run(ctx context.Context, req *orchestrate.Request) (*orchestrate.Envelope, error) {
	env, _, err := p.run(ctx, req)
	return env, err
}

func (p *Planner) run(ctx context.Context, req *orchestrate.Request) (*orchestrate.Envelope, *Result, error) {
	ctx = toolcontext.EnsureRequestID(ctx)
	// Planning, the run and the reactive fallback draw from one budget.
	ctx = p.opts.Engine.Budgeted(ctx, req)
	var (
		res  *Result
		perr error
	)
	planFunc := func(ctx context.Context) (*orchestrate.Plan, *orchestrate.PlannerInfo, []*orchestrate.Issue, error) {
		res, perr = p.Plan(ctx, req)
		return res.Plan, res.Info, res.Issues, perr
	}
	if _, ok := p.opts.Model.(*llm.InputSampling); ok {
		// The model's answers arrive over several invocations of the tool:
		// plan first, and run only once the plan is complete, so that an
		// unfinished round leaves no failed run behind.
		res, perr = p.Plan(ctx, req)
		if errors.Is(perr, llm.ErrInputRequired) {
			return nil, res, perr
		}
		done := res
		planFunc = func(context.Context) (*orchestrate.Plan, *orchestrate.PlannerInfo, []*orchestrate.Issue, error) {
			return done.Plan, done.Info, done.Issues, perr
		}
	}
	applies := func(err error) bool {
		return p.fallback(req) == FallbackReactive && ctx.Err() == nil && !errors.Is(err, ErrRecursion) && !errors.Is(err, ErrNoModel)
	}
	if _, ok := p.opts.Model.(*llm.InputSampling); ok {
		env := p.opts.Engine.RunPrompt(ctx, req, planFunc)
		if perr != nil && applies(perr) && req.Fallback == FallbackReactive {
			env.Artifact.Errors = append(env.Artifact.Errors, &orchestrate.Error{Code: orchestrate.CodePlannerFailed,
				Message: "the reactive fallback is not available when the client's model answers through input requests; configure a planner model to use it"})
		}
		return env, res, nil
	}
	// The fallback takes the run over: one run, one record, its steps the
	// loop's calls.
	env := p.opts.Engine.RunPromptFallback(ctx, req, planFunc, &orchestrate.Fallback{
		Applies: applies,
		Run: func(ctx context.Context, c *orchestrate.ChildRun, err error) *orchestrate.Envelope {
			return p.reactive(ctx, req, res, c, err)
		},
	})
	if perr == nil {
		p.reflect(ctx, req.Prompt, env)
	}
	return env, res, nil
}

// Ask runs PLAN → EXECUTE → RESPOND: Run, then one more model call that
// writes the answer from the results (not needed after a direct response
// or the reactive fallback, which answer themselves). The answer is the
// envelope's artifact.response; artifact.planner counts every model call.
func (p *Planner) Ask(ctx context.Context, req *orchestrate.Request) (*orchestrate.Envelope, error) {
	ctx = p.opts.Engine.Budgeted(ctx, req) // RESPOND's model call counts too
	env, res, err := p.run(ctx, req)
	if err != nil {
		return nil, err
	}
	a := env.Artifact
	switch {
	case a.Planner != nil && a.Planner.Fallback != "":
		return env, nil
	case a.Plan != nil && a.Plan.Type == "direct_response" && a.Success:
		return env, nil
	case res == nil || (res.Plan == nil && len(res.Issues) == 0):
		return env, nil // no plan at all: the model failed, there is nothing to answer from
	case a.Success && a.Answer != "":
		// The plan's own answer rendered: no model call is needed.
		a.Response = a.Answer
		return env, nil
	}
	if _, err := p.respond(ctx, req.Prompt, req.Context, env); err != nil {
		env.Artifact.Errors = append(env.Artifact.Errors, &orchestrate.Error{Code: orchestrate.CodePlannerFailed, Message: "writing the answer: " + err.Error()})
	}
	return env, nil
}

const respondSystem = `You are orchestra. A plan of tool calls ran for the user's goal; what it produced follows. Write the answer to the goal from the results, for the user: use the outputs, say plainly what failed or did not run and why, and do not invent results. Answer in plain text.`

// maxRespondBytes caps the run record sent to the model.
const maxRespondBytes = 96 << 10

// Respond makes one model call that writes the answer to prompt from the
// envelope's results (the RESPOND stage). It records the call in
// env.Artifact.Planner and sets env.Artifact.Response.
func (p *Planner) Respond(ctx context.Context, prompt string, env *orchestrate.Envelope) (string, error) {
	return p.respond(ctx, prompt, nil, env)
}

// respond is Respond with the caller's context.
func (p *Planner) respond(ctx context.Context, prompt string, cc *orchestrate.CallerContext, env *orchestrate.Envelope) (string, error) {
	if p.opts.Model == nil {
		return "", ErrNoModel
	}
	ctx = toolcontext.WithPlannerDisabled(ctx)
	a := env.Artifact
	if a.Planner == nil {
		a.Planner = &orchestrate.PlannerInfo{Model: p.opts.Model.Name()}
	}
	record := respondRecord(env)
	if a.Plan != nil && a.Plan.Reasoning != "" {
		record["reasoning"] = a.Plan.Reasoning
	}
	data, err := json.Marshal(record)
	if err != nil {
		return "", fmt.Errorf("encoding the results: %w", err)
	}
	text := textcut.Truncate(string(data), maxRespondBytes)
	resp, err := p.generate(ctx, a.Planner, &llm.Request{
		System:   respondSystem,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Goal:\n" + strings.TrimSpace(prompt) + p.contextPart(cc) + "\n\nWhat ran:\n" + text}},
	})
	if err != nil {
		return "", err
	}
	a.Response = strings.TrimSpace(resp.Text)
	return a.Response, nil
}
