package server_test

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
)

// BenchmarkEchoPlan is the job of the bench's slop section in one process:
// twelve sequential echo calls to server-everything, made as one plan
// (compact with a return value, compact, full) and, for comparison, as
// twelve calls of the proxied tool. The client talks to orchestra over
// in-memory transports; server-everything runs under node over stdio.
// What a plan costs beyond the round trips is the difference between
// plan and direct. Profile it with -cpuprofile and -memprofile:
//
//	go test -run '^$' -bench EchoPlan -benchtime 200x -cpuprofile /tmp/cpu.out ./server/
func BenchmarkEchoPlan(b *testing.B) {
	const n = 12
	_, cs := downstreamApp(b, map[string]mcpserver.ServerConfig{"ev": npmServer(b, "server-everything")}, nil)
	steps := make([]any, n)
	for i := range n {
		steps[i] = map[string]any{"id": fmt.Sprintf("a%d", i), "tool": "ev__echo", "arguments": map[string]any{"message": fmt.Sprintf("step %d", i)}}
	}
	plan := func(response string, ret bool) map[string]any {
		p := map[string]any{"steps": steps}
		if ret {
			p["return"] = fmt.Sprintf("$a%d.output", n-1)
		}
		return map[string]any{"plan": p, "response": response}
	}
	call := func(b *testing.B, name string, args any) int {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("%s failed: %v", name, res.Content)
		}
		return len(res.Content)
	}
	b.Run("way=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range n {
				call(b, "ev__echo", map[string]any{"message": fmt.Sprintf("step %d", i)})
			}
		}
	})
	for _, w := range []struct {
		name     string
		response string
		ret      bool
	}{{"compact+return", "compact", true}, {"compact", "compact", false}, {"full", "full", false}} {
		b.Run("way=plan/"+w.name, func(b *testing.B) {
			args := plan(w.response, w.ret)
			b.ReportAllocs()
			for b.Loop() {
				call(b, "agent_orchestrate", args)
			}
		})
	}
}
