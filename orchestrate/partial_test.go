package orchestrate

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// TestPartialResult: a tool that answers partially (an agent's status
// partial) ends its step partial with its output and its code; the steps
// after it run on that output, and the plan ends partial.
func TestPartialResult(t *testing.T) {
	cat := registry.NewCatalog(
		fakeTool(t, "half", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			return &registry.Result{Structured: map[string]any{"got": "some"}, Partial: true, Code: "max_tool_steps",
				Content: []mcp.Content{&mcp.TextContent{Text: "stopped early\n\nwhat it got"}}}, nil
		}),
		fakeTool(t, "echo", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			return structured(args), nil
		}),
	)
	te := newTestEngine(t, cat, Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"id":"h","tool":"half"},{"id":"e","tool":"echo","arguments":{"v":"$h.output.got"}}]}}`))
	te.logs.checkFSM(t)
	a := env.Artifact
	if a.Status != StatusPartial || len(a.Steps) != 2 {
		t.Fatalf("status %s, steps %d; want partial, 2", a.Status, len(a.Steps))
	}
	h, e := a.Steps[0], a.Steps[1]
	if h.Status != StatusPartial || h.Error == nil || h.Error.Code != "max_tool_steps" || h.Error.Message != "stopped early" {
		t.Errorf("the partial step: %s, error %+v", h.Status, h.Error)
	}
	if e.Status != StatusSuccess || e.Output.(map[string]any)["v"] != "some" {
		t.Errorf("the next step: %s, output %v", e.Status, e.Output)
	}
}
