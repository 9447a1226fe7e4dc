package planner_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// The prompt path draws from its request's budget: planning, the run and
// the reactive fallback share its model calls, its tool calls and its
// deadline.

// TestPlanningCountsModelCalls: a repair the request has no model call
// left for is not made; the run says which limit stopped it.
func TestPlanningCountsModelCalls(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(validPlan)})
	f := newFixture(t, m, fixtureOpts{limits: orchestrate.Limits{MaxModelCalls: 1}})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("the model was asked %d times under limits.max_model_calls 1", n)
	}
	a := env.Artifact
	if a.Status != orchestrate.StatusFailed || len(a.Errors) == 0 || a.Errors[0].Code != orchestrate.CodeLimitExceeded ||
		!strings.Contains(a.Errors[0].Message, "limits.max_model_calls") {
		t.Errorf("status %s, errors %v; want limit_exceeded naming limits.max_model_calls", a.Status, a.Errors)
	}
}

// TestReactiveFallbackSharesTheToolCalls: the reactive fallback's calls
// are the request's: under limits.max_tool_calls 2 the third is refused,
// and the loop then asks for the answer without tools. (Each call was a
// run with a limit of its own.)
func TestReactiveFallbackSharesTheToolCalls(t *testing.T) {
	// The model plans badly, then calls research_blog while it may call
	// tools, and answers when it may not.
	var asked int
	m := modelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		var r llm.Response
		switch {
		case len(req.Tools) == 1 && req.Tools[0].Name == planner.ToolName:
			r = planning(invalidPlan)
		case len(req.Tools) > 0 && req.ToolChoice != llm.ToolChoiceNone:
			asked++
			r = toolCall("research_blog", `{"topic":"AI"}`)
		default:
			r = text("Done.")
		}
		return &r, nil
	})
	f := newFixture(t, m, fixtureOpts{limits: orchestrate.Limits{MaxToolCalls: 2}})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "blog", Fallback: planner.FallbackReactive})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.calls.list()); n != 2 || asked != 2 {
		t.Errorf("%d tool calls ran (%d asked for) under limits.max_tool_calls 2", n, asked)
	}
	if a := env.Artifact; a.Response != "Done." {
		t.Errorf("response %q, errors %v", a.Response, a.Errors)
	}
}

// TestPromptPathSharesTheDeadline: planning that took most of the
// request's timeout_ms leaves the run only the rest. (The run had a whole
// timeout of its own after planning.)
func TestPromptPathSharesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := registry.Tool{Name: "slow", Description: "Takes 100 ms.", Source: "test",
			InputSchema: schema(t, `{"type":"object"}`),
			Call: func(ctx context.Context, _ *registry.CallRequest) (*registry.Result, error) {
				select {
				case <-time.After(100 * time.Millisecond):
					return &registry.Result{Structured: map[string]any{"ok": true}}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}}
		m := modelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
			time.Sleep(120 * time.Millisecond) // planning takes 120 of the request's 150 ms
			r := planning(`{"type":"tool_calls","calls":[{"tool_name":"slow","arguments":{}}]}`)
			return &r, nil
		})
		cat := registry.NewCatalog(slow)
		e := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
		p := planner.New(planner.Options{Catalog: cat, Engine: e, Model: m})
		env, err := p.Run(t.Context(), &orchestrate.Request{Prompt: "go", TimeoutMS: 150})
		if err != nil {
			t.Fatal(err)
		}
		a := env.Artifact
		if a.Success || len(a.Steps) != 1 || a.Steps[0].Error == nil || a.Steps[0].Error.Code != orchestrate.CodeDeadlineExceeded || env.Metadata.DurationMS != 150 {
			t.Errorf("a run left 30 ms of its request's 150 ran a step of 100 ms:\n%s", env.JSON())
		}
	})
}

// TestEarlyCallsAreTheRequests: the calls started while a plan was
// written are the request's, whether a step takes them or the plan is
// rejected: under limits.max_tool_calls 2, a rejected attempt's two early
// calls leave the repaired plan none. (They were counted apart from the
// run's, so the request made four.)
func TestEarlyCallsAreTheRequests(t *testing.T) {
	invalid := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"a"}},{"tool_name":"lookup","arguments":{"key":"b"}},{"tool_name":"nope","arguments":{"key":"x"}}]}`
	valid := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"a"}},{"tool_name":"lookup","arguments":{"key":"b"}}]}`
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		cat := registry.NewCatalog(st.tools(t)...)
		e := orchestrate.NewEngine(orchestrate.Options{Tools: cat, Limits: orchestrate.Limits{MaxToolCalls: 2}})
		m := llm.NewScripted([]llm.Response{planning(invalid), planning(valid)}).Streaming(llm.StreamScript{Split: byCall})
		p := planner.New(planner.Options{Catalog: cat, Engine: e, Model: m, Attempts: 2})
		env, err := p.Run(t.Context(), &orchestrate.Request{Prompt: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if calls := st.list(); len(calls) > 2 {
			t.Errorf("the request made %d tool calls under limits.max_tool_calls 2: %v", len(calls), calls)
		}
		if env.Artifact.Success || !strings.Contains(string(env.JSON()), "limits.max_tool_calls") {
			t.Errorf("a run with no tool call left: %s", env.Summary())
		}
	})
}
