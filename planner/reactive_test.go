package planner_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

func toolCall(name, args string) llm.Response {
	return llm.Response{ToolCalls: []llm.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 1}}
}

// When planning fails and the request asks for it, a bounded reactive tool
// loop with the same model reaches the goal; its calls are the steps.
func TestReactiveFallback(t *testing.T) {
	m := llm.NewScripted([]llm.Response{
		planning(invalidPlan), planning(invalidPlan), // planning fails twice
		toolCall("research_blog", `{"topic":"AI"}`),
		toolCall("create_blog_post", `{"artifact_id":"abc-123"}`), // invalid: missing arguments
		toolCall("create_blog_post", `{"artifact_id":"abc-123","skill_id":"s","instructions":"write"}`),
		text("Done: post post-abc-123."),
	})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "blog", Fallback: planner.FallbackReactive})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if a.Status != orchestrate.StatusPartial || a.Response != "Done: post post-abc-123." {
		t.Fatalf("status %s, response %q, errors %v", a.Status, a.Response, a.Errors)
	}
	if a.Planner.Fallback != planner.FallbackReactive || a.Planner.ModelCalls != 6 {
		t.Errorf("planner = %+v", a.Planner)
	}
	var got []string
	for _, s := range a.Steps {
		got = append(got, s.ID+" "+s.Tool+" "+s.Status)
	}
	want := []string{"call_0 research_blog success", "call_1 create_blog_post failed", "call_2 create_blog_post success"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if a.Steps[1].Error.Code != orchestrate.CodeValidation || !strings.Contains(a.Steps[1].Error.Message, "instructions") {
		t.Errorf("the invalid call's error = %+v", a.Steps[1].Error)
	}
	if diff := cmp.Diff([]string{"research_blog", "create_blog_post"}, f.calls.list()); diff != "" {
		t.Errorf("tools that ran (-want +got):\n%s", diff)
	}
	// The tools ran with planner tools disabled.
	if slices.Contains(f.calls.plannerDisabled, false) {
		t.Errorf("planner disabled per call: %v", f.calls.plannerDisabled)
	}
	// The model saw the validation error of its invalid call and the tools'
	// results; agent_orchestrate was not offered.
	reqs := m.Requests()
	fourth := reqs[4]
	last := fourth.Messages[len(fourth.Messages)-1]
	if last.Role != llm.RoleTool || !strings.Contains(last.Content, "instructions") {
		t.Errorf("the invalid call's feedback = %+v", last)
	}
	for _, td := range reqs[2].Tools {
		if td.Name == orchestrate.ToolName {
			t.Error("agent_orchestrate offered in the reactive loop")
		}
	}
	if len(a.Warnings) == 0 || a.Warnings[0].Code != orchestrate.CodeFieldNotFound {
		t.Errorf("the planner's errors are not kept as warnings: %v", a.Warnings)
	}
}

// Without the fallback the same failure fails the run.
func TestNoFallbackWithoutRequest(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(invalidPlan)})
	f := newFixture(t, m, fixtureOpts{})
	env, _ := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "blog"})
	if env.Artifact.Status != orchestrate.StatusFailed || env.Artifact.Planner.Fallback != "" || m.Remaining() != 0 {
		t.Errorf("status %s, planner %+v", env.Artifact.Status, env.Artifact.Planner)
	}
}

// The loop is bounded by max_tool_steps: after that the model must answer.
func TestReactiveBounded(t *testing.T) {
	responses := []llm.Response{planning(invalidPlan), planning(invalidPlan)}
	for range 2 {
		responses = append(responses, toolCall("fetch_page", `{"url":"https://example.com"}`))
	}
	responses = append(responses, text("Read two pages."))
	m := llm.NewScripted(responses)
	f := newFixture(t, m, fixtureOpts{steps: 2})
	env, err := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "read", Fallback: planner.FallbackReactive})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if len(a.Steps) != 2 || a.Response == "" {
		t.Fatalf("steps %d, response %q", len(a.Steps), a.Response)
	}
	reqs := m.Requests()
	final := reqs[len(reqs)-1]
	if final.ToolChoice != llm.ToolChoiceNone || !strings.Contains(userText(final), "No more tool calls") {
		t.Errorf("the last turn did not forbid tools: choice %q", final.ToolChoice)
	}
	if a.Planner.ModelCalls != 5 {
		t.Errorf("%d model calls, want 2 planning + 2 tool turns + 1 answer", a.Planner.ModelCalls)
	}
}
