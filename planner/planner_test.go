package planner_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

func TestPlanValid(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(validPlan)})
	f := newFixture(t, m, fixtureOpts{})
	res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "Write a blog post about AI trends"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Plan.Steps); got != 2 || res.Plan.Steps[1].Tool != "create_blog_post" {
		t.Fatalf("plan = %+v", res.Plan)
	}
	want := &orchestrate.PlannerInfo{Model: "scripted", ModelCalls: 1, Attempts: 1, InputTokens: 1000, OutputTokens: 100}
	if diff := cmp.Diff(want, res.Info); diff != "" {
		t.Errorf("info (-want +got):\n%s", diff)
	}
	reqs := m.Requests()
	r := reqs[0]
	if r.ToolChoice != planner.ToolName || len(r.Tools) != 1 || r.Tools[0].Name != planner.ToolName || !r.Tools[0].Strict {
		t.Errorf("request offers %+v with choice %q; want the strict __planning__ tool, forced", r.Tools, r.ToolChoice)
	}
	if !strings.Contains(r.System, "## research_blog") || !strings.Contains(userText(r), "Write a blog post about AI trends") {
		t.Errorf("system prompt or goal missing:\n%s\n%s", r.System, userText(r))
	}
	if len(f.calls.list()) != 0 {
		t.Errorf("planning ran tools: %v", f.calls.list())
	}
}

// The answer may come as JSON in text, in a code fence; the nulls a strict
// schema makes the model write are dropped before validation.
func TestPlanFromText(t *testing.T) {
	answer := "Here is the plan:\n```json\n" + `{"type":"tool_calls","reasoning":null,"content":null,"calls":[
		{"tool_name":"create_blog_post","arguments":{"artifact_id":"a1","skill_id":"s","instructions":"i","tone":null,"tags":null,"options":null}}]}` + "\n```\n"
	m := llm.NewScripted([]llm.Response{text(answer)})
	f := newFixture(t, m, fixtureOpts{})
	res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "write"})
	if err != nil {
		t.Fatalf("%v: %v", err, res.Issues)
	}
	if diff := cmp.Diff(map[string]any{"artifact_id": "a1", "skill_id": "s", "instructions": "i"}, res.Plan.Steps[0].Arguments); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
}

// The repair loop: the first answer is invalid, its errors go back to the
// model with the answer, and the second answer is valid.
func TestPlanRepair(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(validPlan)})
	f := newFixture(t, m, fixtureOpts{})
	res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if err != nil {
		t.Fatalf("%v: %v", err, res.Issues)
	}
	if res.Info.ModelCalls != 2 || res.Info.Attempts != 2 || res.Info.InputTokens != 2000 || res.Info.LastAnswer != "" || len(res.Issues) != 0 {
		t.Errorf("info = %+v, issues %v", res.Info, res.Issues)
	}
	reqs := m.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	second := reqs[1].Messages
	if len(second) != 3 || second[1].Role != llm.RoleAssistant || len(second[1].ToolCalls) != 1 || second[2].Role != llm.RoleTool || second[2].ToolCallID != second[1].ToolCalls[0].ID {
		t.Fatalf("second request messages = %+v", second)
	}
	feedback := second[2].Content
	for _, want := range []string{"attempt 1 of 2", "$0.output.id", "field_not_found", "artifact_id", "call __planning__ again"} {
		if !strings.Contains(feedback, want) {
			t.Errorf("the feedback does not mention %q:\n%s", want, feedback)
		}
	}
}

// Run after a repair runs the repaired plan.
func TestRunAfterRepair(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(validPlan)})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if err != nil {
		t.Fatal(err)
	}
	if a := env.Artifact; !a.Success || len(a.ValidationErrors) != 0 || a.Planner.ModelCalls != 2 || len(f.calls.list()) != 2 {
		t.Errorf("status %s, validation %v, planner %+v, calls %v", a.Status, a.ValidationErrors, a.Planner, f.calls.list())
	}
}

// Giving up: every answer is invalid; the last one and its errors are in
// the response, and nothing ran.
func TestPlanGivesUp(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(`{"type":"tool_calls","calls":[{"tool_name":"nope","arguments":{}}]}`)})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if a.Success || a.Status != orchestrate.StatusFailed {
		t.Fatalf("status %s", a.Status)
	}
	if a.Planner == nil || a.Planner.ModelCalls != 2 || a.Planner.Attempts != 2 || !strings.Contains(a.Planner.LastAnswer, `"nope"`) {
		t.Errorf("planner = %+v", a.Planner)
	}
	if len(a.ValidationErrors) == 0 || a.ValidationErrors[0].Code != orchestrate.CodeUnknownTool {
		t.Errorf("validation errors = %v", a.ValidationErrors)
	}
	if len(a.Errors) == 0 || a.Errors[0].Code != orchestrate.CodePlannerFailed || !strings.Contains(a.Errors[0].Message, "gave up after 2 attempts") {
		t.Errorf("errors = %v", a.Errors)
	}
	if len(f.calls.list()) != 0 {
		t.Errorf("tools ran: %v", f.calls.list())
	}
	// The planner ran, no plan was ready, and the run failed.
	want := []string{"run_started planning", "run_finished failed"}
	if diff := cmp.Diff(want, f.events.path()); diff != "" {
		t.Errorf("lifecycle (-want +got):\n%s", diff)
	}
}

// Attempts are configurable: with 1, no repair is asked for.
func TestPlanAttemptsConfigurable(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(validPlan)})
	f := newFixture(t, m, fixtureOpts{attempts: 1})
	res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if !errors.Is(err, planner.ErrGaveUp) || res.Info.ModelCalls != 1 || m.Remaining() != 1 {
		t.Errorf("err %v, info %+v, remaining %d", err, res.Info, m.Remaining())
	}
}

// A direct response runs nothing and costs one model call, in Run and Ask.
func TestDirectResponse(t *testing.T) {
	for _, ask := range []bool{false, true} {
		m := llm.NewScripted([]llm.Response{planning(`{"type":"direct_response","content":"Hello! How can I help?","reasoning":null,"calls":null}`)})
		f := newFixture(t, m, fixtureOpts{})
		run := f.planner.Run
		if ask {
			run = f.planner.Ask
		}
		env, err := run(t.Context(), &orchestrate.Request{Prompt: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		a := env.Artifact
		if !a.Success || a.Response != "Hello! How can I help?" || len(a.Steps) != 0 {
			t.Errorf("ask=%v: status %s, response %q, steps %d", ask, a.Status, a.Response, len(a.Steps))
		}
		if a.Planner.ModelCalls != 1 || m.Remaining() != 0 {
			t.Errorf("ask=%v: %d model calls", ask, a.Planner.ModelCalls)
		}
		if len(f.calls.list()) != 0 {
			t.Errorf("tools ran: %v", f.calls.list())
		}
	}
}

// Ask with tools: PLAN → EXECUTE → RESPOND, two model calls; the run
// plans, its plan is ready, and it succeeds.
func TestAskWithTools(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(validPlan), text("I researched AI trends and wrote post post-abc-123.")})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "Write a blog post about AI trends"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if !a.Success || a.Response != "I researched AI trends and wrote post post-abc-123." {
		t.Fatalf("status %s, response %q, errors %v", a.Status, a.Response, a.Errors)
	}
	if env.Metadata.RequestID == "" {
		t.Error("the envelope of an ask has no request_id")
	}
	want := &orchestrate.PlannerInfo{Model: "scripted", ModelCalls: 2, Attempts: 1, InputTokens: 1500, OutputTokens: 150}
	if diff := cmp.Diff(want, a.Planner); diff != "" {
		t.Errorf("planner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"research_blog", "create_blog_post"}, f.calls.list()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := a.Steps[1].Arguments["artifact_id"]; got != "abc-123" {
		t.Errorf("the template resolved to %v", got)
	}
	respond := m.Requests()[1]
	if len(respond.Tools) != 0 || !strings.Contains(userText(respond), "post-abc-123") || !strings.Contains(userText(respond), "Write a blog post about AI trends") {
		t.Errorf("the RESPOND call does not carry the goal and the results:\n%s", userText(respond))
	}
	lifecycle := []string{"run_started planning", "plan_ready", "run_finished success"}
	if diff := cmp.Diff(lifecycle, f.events.path()); diff != "" {
		t.Errorf("lifecycle (-want +got):\n%s", diff)
	}
}

// Ask after a plan that could not be fixed still answers (PLAN → RESPOND).
func TestAskAfterInvalidPlan(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(invalidPlan), text("I could not make a valid plan.")})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if err != nil {
		t.Fatal(err)
	}
	if a := env.Artifact; a.Success || a.Response != "I could not make a valid plan." || a.Planner.ModelCalls != 3 {
		t.Errorf("status %s, response %q, planner %+v", a.Status, a.Response, a.Planner)
	}
}

// The recursion guard: the model is asked with planner tools disabled in
// the context, and planning inside planning is refused.
func TestRecursionGuard(t *testing.T) {
	var sawDisabled []bool
	m := modelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		sawDisabled = append(sawDisabled, toolcontext.PlannerDisabled(ctx))
		r := planning(validPlan)
		return &r, nil
	})
	f := newFixture(t, m, fixtureOpts{})
	if _, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "x"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sawDisabled, []bool{true}) {
		t.Errorf("planner disabled during the model call: %v", sawDisabled)
	}
	res, err := f.planner.Plan(toolcontext.WithPlannerDisabled(t.Context()), &orchestrate.Request{Prompt: "x"})
	if !errors.Is(err, planner.ErrRecursion) || res.Info.ModelCalls != 0 {
		t.Errorf("planning inside planning: err %v, %d model calls", err, res.Info.ModelCalls)
	}
	for _, name := range f.planner.Tool().Tools {
		if name == orchestrate.ToolName {
			t.Error("agent_orchestrate is offered to the planner")
		}
	}
}

// A planner that runs out of the plan's time is a timeout.
func TestPlannerTimeout(t *testing.T) {
	m := modelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		<-ctx.Done()
		return nil, &llm.Error{Provider: "test", Kind: llm.ErrTimeout, Err: ctx.Err()}
	})
	f := newFixture(t, m, fixtureOpts{})
	start := time.Now()
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "x", TimeoutMS: 50})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	a := env.Artifact
	if a.Status != orchestrate.StatusFailed || len(a.Errors) != 1 || a.Errors[0].Code != orchestrate.CodeTimeout {
		t.Errorf("status %s, errors %v", a.Status, a.Errors)
	}
}

// A model error fails the run with the error, and Ask makes no RESPOND call.
func TestModelError(t *testing.T) {
	m := llm.NewScripted(nil)
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if a.Status != orchestrate.StatusFailed || a.Errors[0].Code != orchestrate.CodePlannerFailed || !strings.Contains(a.Errors[0].Message, "script exhausted") || a.Planner.ModelCalls != 1 {
		t.Errorf("status %s, errors %v, planner %+v", a.Status, a.Errors, a.Planner)
	}
}

// The plan the model writes obeys the same limits as any other.
func TestPlanLimits(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(validPlan), planning(validPlan)})
	f := newFixture(t, m, fixtureOpts{limits: orchestrate.Limits{MaxSteps: 1}})
	res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "x"})
	if !errors.Is(err, planner.ErrGaveUp) || len(res.Issues) == 0 || res.Issues[0].Code != orchestrate.CodeTooManySteps {
		t.Errorf("err %v, issues %v", err, res.Issues)
	}
	if !strings.Contains(m.Requests()[0].System, "at most 1 calls") {
		t.Error("the prompt does not state the step limit")
	}
}

// Bindings are offered to the model and validated in its plan.
func TestPlanBindings(t *testing.T) {
	plan := `{"type":"tool_calls","calls":[{"tool_name":"research_blog","arguments":{"topic":"$bindings.topic"}}]}`
	m := llm.NewScripted([]llm.Response{planning(plan)})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "research the topic", Bindings: map[string]any{"topic": "robots"}})
	if err != nil {
		t.Fatal(err)
	}
	if !env.Artifact.Success || env.Artifact.Steps[0].Arguments["topic"] != "robots" {
		t.Errorf("status %s, steps %+v", env.Artifact.Status, env.Artifact.Steps)
	}
	if !strings.Contains(userText(m.Requests()[0]), `- topic: "robots"`) {
		t.Errorf("bindings not offered:\n%s", userText(m.Requests()[0]))
	}
}

// modelFunc is a Model made of a function.
type modelFunc func(ctx context.Context, req *llm.Request) (*llm.Response, error)

func (f modelFunc) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}
func (f modelFunc) Name() string { return "func" }
