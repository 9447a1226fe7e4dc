package server_test

import (
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
)

// BenchmarkOneStepPlan calls agent_orchestrate with a plan of one step over
// in-memory transports, with the records in memory and on disk, next to a
// call of the bare tool: what a run costs beyond the tool is the
// difference. Profile it with -cpuprofile to see the request path.
func BenchmarkOneStepPlan(b *testing.B) {
	plan := map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "probe", "arguments": map[string]any{"label": "hi"}},
	}}}
	for _, bc := range []struct {
		name, store, tool string
		args              any
	}{
		{"call=bare", "memory", "probe", map[string]any{"label": "hi"}},
		{"call=plan/store=memory", "memory", "agent_orchestrate", plan},
		{"call=plan/store=file", "file", "agent_orchestrate", plan},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := bc.store
			if path == "file" {
				path = filepath.Join(b.TempDir(), "orchestra.db")
			}
			var p probe
			app, err := server.New(b.Context(), config.Default(), server.Options{Store: path, Tools: []registry.Tool{p.tool(b, "probe")}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { app.Close() })
			st, ct := mcp.NewInMemoryTransports()
			ss, err := app.Server.Connect(b.Context(), st, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { ss.Close() })
			cs, err := newClient().Connect(b.Context(), ct, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			params := &mcp.CallToolParams{Name: bc.tool, Arguments: bc.args}
			b.ReportAllocs()
			for b.Loop() {
				res, err := cs.CallTool(b.Context(), params)
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError {
					b.Fatalf("%s failed: %v", bc.tool, res.Content)
				}
			}
		})
	}
}
