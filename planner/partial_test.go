package planner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// TestReactiveReadsPartialAnswers: in the reactive loop a tool that
// answers partially (an agent's status partial) is a result the model
// reads, not an error; the step is partial and so is the run.
func TestReactiveReadsPartialAnswers(t *testing.T) {
	half := registry.Tool{Name: "half", Description: "Answers half.", Source: "test", InputSchema: schema(t, `{"type":"object"}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			return &registry.Result{Structured: map[string]any{"status": "partial", "result": map[string]any{"text": "the first half"}},
				Partial: true, Code: "max_tool_steps", Content: []mcp.Content{&mcp.TextContent{Text: "stopped early"}}}, nil
		}}
	m := llm.NewScripted([]llm.Response{planning(invalidPlan), planning(invalidPlan), toolCall("half", `{}`), text("Half of it.")})
	f := &fixture{calls: &calls{}, events: &events{}}
	cat := registry.NewCatalog(append(blogTools(t, f.calls), half)...)
	engine := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
	p := planner.New(planner.Options{Catalog: cat, Engine: engine, Model: m})
	env, err := p.Run(t.Context(), &orchestrate.Request{Prompt: "half", Fallback: planner.FallbackReactive})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if a.Status != orchestrate.StatusPartial || len(a.Steps) != 1 || a.Steps[0].Status != orchestrate.StatusPartial || a.Response != "Half of it." {
		t.Fatalf("status %s, steps %d, response %q", a.Status, len(a.Steps), a.Response)
	}
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	told := last[len(last)-1].Content
	if strings.HasPrefix(told, "error") || !strings.Contains(told, "the first half") {
		t.Errorf("the model was told %q; want the partial answer", told)
	}
}
