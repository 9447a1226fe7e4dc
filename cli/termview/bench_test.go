package termview

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// BenchmarkRun runs a plan of 12 tool steps (a step, a group of 10, a
// step) on an engine with no view, with a Lines view and with a Live view
// (its bars drawn on no terminal): what the view's hooks cost a run.
func BenchmarkRun(b *testing.B) {
	noop := registry.Tool{Name: "noop", Description: "Returns at once.", InputSchema: &jsonschema.Schema{Type: "object"},
		Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) {
			return &registry.Result{Structured: map[string]any{"ok": true}}, nil
		}}
	var group []string
	for i := range 10 {
		group = append(group, fmt.Sprintf(`{"id": "g%d", "tool": "noop", "arguments": {}}`, i))
	}
	req, issues := orchestrate.DecodeRequest([]byte(`{"max_parallel": 10, "plan": {"steps": [{"id": "first", "tool": "noop", "arguments": {}},
		{"id": "g", "parallel": [` + strings.Join(group, ",") + `]}, {"id": "last", "tool": "noop", "arguments": {}}]}}`))
	if len(issues) > 0 {
		b.Fatal(issues)
	}
	for _, mode := range []Mode{Off, Lines, Live} {
		b.Run(mode.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := New(io.Discard, Options{Mode: mode})
				e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(noop), Hooks: v.Hooks()})
				if env := e.Run(context.Background(), req); !env.Artifact.Success {
					b.Fatalf("the plan failed: %v", env.Artifact.Errors)
				}
				v.Close()
			}
		})
	}
}
