package planner_test

import (
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// A plan with an answer that renders after a successful run is the
// answer: ask makes one model call.
func TestAskWithAnswerSkipsRespond(t *testing.T) {
	plan := `{"type":"tool_calls","reasoning":"Research, then write.","answer":"Wrote ${1.output.post_id} (${1.output.words} words) on ${0.output.artifact.title}.","calls":[
	{"tool_name":"research_blog","arguments":{"topic":"AI"}},
	{"tool_name":"create_blog_post","arguments":{"artifact_id":"$0.output.artifact_id","skill_id":"blog_writing","instructions":"Write"}}]}`
	m := llm.NewScripted([]llm.Response{planning(plan)})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "Write a blog post about AI"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	want := "Wrote post-abc-123 (800 words) on AI Trends 2025: AI."
	if !a.Success || a.Answer != want || a.Response != want {
		t.Fatalf("status %s, answer %q, response %q", a.Status, a.Answer, a.Response)
	}
	if a.Planner.ModelCalls != 1 || len(m.Requests()) != 1 {
		t.Errorf("%d model calls; want 1", a.Planner.ModelCalls)
	}
	// The planning schema offers the answer.
	if params := m.Requests()[0].Tools[0].Parameters["properties"].(map[string]any); params["answer"] == nil {
		t.Errorf("the planning schema has no answer")
	}
}

// An answer that references a step that failed is not rendered: RESPOND
// writes the answer, shown only the outputs it needs.
func TestAskWithFailedAnswerReferenceResponds(t *testing.T) {
	plan := `{"type":"tool_calls","reasoning":"r","answer":"Count: ${0.output.result}","calls":[
	{"tool_name":"json_query","arguments":{"query":"error(\"no data\")","input":{}}}]}`
	m := llm.NewScripted([]llm.Response{planning(plan), text("The post could not be written.")})
	f := newFixture(t, m, fixtureOpts{builtins: true})
	env, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "Write a blog post about AI"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if a.Answer != "" || a.Response != "The post could not be written." || a.Planner.ModelCalls != 2 {
		t.Fatalf("answer %q, response %q, %d model calls, errors %v; want RESPOND to answer", a.Answer, a.Response, a.Planner.ModelCalls, a.Errors)
	}
	if respond := userText(m.Requests()[1]); !strings.Contains(respond, "no data") {
		t.Errorf("RESPOND is not told what failed:\n%s", respond)
	}
}

// RESPOND is shown the outputs no later step consumed, not every step.
func TestRespondSeesOnlyNeededOutputs(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(validPlan), text("Done.")})
	f := newFixture(t, m, fixtureOpts{})
	if _, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "Write a blog post about AI trends"}); err != nil {
		t.Fatal(err)
	}
	respond := userText(m.Requests()[1])
	if !strings.Contains(respond, "post-abc-123") {
		t.Errorf("RESPOND does not see the last output:\n%s", respond)
	}
	if strings.Contains(respond, "https://example.com/a") {
		t.Errorf("RESPOND sees research_blog's output, which the next step consumed:\n%s", respond)
	}
}
