package builtin

import (
	"fmt"
	"testing"

	"github.com/orchestra-mcp/orchestra/internal/worker"
	"github.com/orchestra-mcp/orchestra/registry"
)

// BenchmarkEvaluate measures what a json_query or render call costs in a
// worker process against the same call evaluated in this process: the
// framing, the JSON encoding of the arguments and reply, and the round
// trip through two pipes.
//
//	go test -run '^$' -bench Evaluate -count 6 ./registry/builtin/
func BenchmarkEvaluate(b *testing.B) {
	items := make([]any, 20)
	for i := range items {
		items[i] = map[string]any{"name": fmt.Sprint("item", i), "n": i, "tags": []any{"a", "b"}}
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"json_query", map[string]any{"query": "[.items[] | select(.n > 5) | {name, n}]", "input": map[string]any{"items": items}}},
		{"render", map[string]any{"template": "{{range .items}}{{.name}}: {{.n}}\n{{end}}", "values": map[string]any{"items": items}}},
	}
	jq, render := JQConfig{}.withDefaults(), RenderConfig{}.withDefaults()
	for _, mode := range []string{"worker", "in-process"} {
		if mode == "worker" && !worker.Supported {
			continue
		}
		for _, c := range calls {
			b.Run(fmt.Sprintf("tool=%s/%s", c.tool, mode), func(b *testing.B) {
				ev := &evaluator{memory: jq.MaxMemoryBytes}
				if mode == "worker" {
					ev = newEvaluator(jq.MaxMemoryBytes, DefaultWorkers, testOpts.Workers)
				}
				tool := jsonQueryTool(jq, ev)
				if c.tool == "render" {
					tool = renderTool(render, ev)
				}
				req := &registry.CallRequest{Arguments: c.args}
				if res, err := tool.Invoke(b.Context(), req); err != nil || res.IsError {
					b.Fatalf("%v %v", res, err)
				}
				for b.Loop() {
					if _, err := tool.Invoke(b.Context(), req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
