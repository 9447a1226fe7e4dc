package server_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
)

// BenchmarkOneStepPlan calls agent_orchestrate with a plan of one step over
// in-memory transports, with the records in memory and on disk, next to a
// call of the bare tool: what a run costs beyond the tool is the
// difference. clients=16 calls from 16 sessions at once. Profile it with
// -cpuprofile to see the request path.
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
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", bc.name, clients), func(b *testing.B) {
				path := bc.store
				if path == "file" {
					path = filepath.Join(b.TempDir(), "orchestra.db")
				}
				var p probe
				cfg := config.Default()
				cfg.Limits.MaxConcurrentPlans = 1024
				app, err := server.New(b.Context(), cfg, server.Options{Store: path, Tools: []registry.Tool{p.tool(b, "probe")}})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { app.Close() })
				sessions := connectSessions(b, app, clients)
				params := &mcp.CallToolParams{Name: bc.tool, Arguments: bc.args}
				call := func(cs *mcp.ClientSession) error {
					res, err := cs.CallTool(b.Context(), params)
					if err == nil && res.IsError {
						err = fmt.Errorf("%s failed: %v", bc.tool, res.Content)
					}
					return err
				}
				b.ReportAllocs()
				if clients == 1 {
					for b.Loop() {
						if err := call(sessions[0]); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				var next atomic.Int64
				b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					cs := sessions[int(next.Add(1)-1)%clients]
					for pb.Next() {
						if err := call(cs); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// connectSessions connects n clients to app over in-memory transports,
// closed when b ends.
func connectSessions(b *testing.B, app *server.App, n int) []*mcp.ClientSession {
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := app.Server.Connect(b.Context(), st, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ss.Close() })
		if sessions[i], err = newClient().Connect(b.Context(), ct, nil); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sessions[i].Close() })
	}
	return sessions
}
