package planner_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

// The planner teaches loops and conditions, and the flow of its answer
// becomes a for_each around a call and a when on another, validated and
// run like any plan.
func TestPlannerFlow(t *testing.T) {
	const plan = `{"type":"tool_calls","reasoning":"Research, read every source, write.","content":null,"calls":[
		{"tool_name":"research_blog","arguments":{"topic":"AI","skill_id":null,"max_sources":null}},
		{"tool_name":"fetch_page","arguments":{"url":"$item.url"}},
		{"tool_name":"create_blog_post","arguments":{"artifact_id":"$0.output.artifact_id","skill_id":"blog","instructions":"Use ${1.output[0].text}","tone":null,"tags":null,"options":null}}],
		"flow":[{"call":1,"for_each":"$0.output.artifact.sources","when":null},{"call":2,"for_each":null,"when":"$0.output.artifact.title"}]}`
	m := llm.NewScripted([]llm.Response{planning(plan), text("Done.")})
	f := newFixture(t, m, fixtureOpts{})
	env, err := f.planner.Ask(t.Context(), &orchestrate.Request{Prompt: "Write about AI from every source"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if !a.Success {
		t.Fatalf("status %s: %v %v", a.Status, a.Errors, a.ValidationErrors)
	}
	if diff := cmp.Diff([]string{"research_blog", "fetch_page", "create_blog_post"}, f.calls.list()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	loop := a.Steps[1]
	if loop.Type != orchestrate.TypeForEach || len(loop.Children) != 1 || loop.Children[0].Arguments["url"] != "https://example.com/a" {
		t.Errorf("step 1 is %s with %d iterations", loop.Type, len(loop.Children))
	}
	if got := a.Steps[2].Arguments["instructions"]; got != "Use page text of https://example.com/a" {
		t.Errorf("instructions = %v", got)
	}
	if a.Plan.Steps[2].When != "$0.output.artifact.title" {
		t.Errorf("step 2's when = %q", a.Plan.Steps[2].When)
	}
	req := m.Requests()[0]
	if !strings.Contains(req.System, `"for_each"`) || !strings.Contains(req.System, `"when"`) {
		t.Error("the planner's prompt does not teach for_each and when")
	}
	if tool := planner.Build(1, f.cat.List(), planner.BuildOptions{}); tool.Strict == nil || tool.Strict["properties"].(map[string]any)["flow"] == nil {
		t.Error("the strict planning schema has no flow")
	}
}
