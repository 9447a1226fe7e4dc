//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStalledConnections holds thousands of stalled POSTs (headers sent,
// body never) open against orchestra serve --http run with a limit of 1,024
// open files, from 127.0.0.2, as the body slowloris did; a client from
// 127.0.0.1 must still connect, list the tools and run a plan. Without the
// connection caps the stalled connections take every file descriptor and
// the client is never accepted.
func TestStalledConnections(t *testing.T) {
	const stalled = 3000
	// An attacker that opens its connections slowly stays under the
	// per-client rate limit; here they open at once, so the rate limit is
	// off to let all of them through to the connection caps.
	srv := serveUnderLimit(t, "--nofile=1024:1024", "server:\n  rate_limit:\n    requests_per_second: -1\n")
	url := srv.url
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")

	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, stalled)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range stalled {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("stalled connection %d: %v", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", addr)
	}
	t.Logf("%d stalled connections opened in %v", stalled, time.Since(start))

	start = time.Now()
	// A bound on how long the client waits, so that a client never
	// accepted fails the test rather than hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "innocent", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("a client from another address could not connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "still served"}},
	}}}})
	if err != nil || res.IsError {
		t.Fatalf("a client from another address could not run a plan: %v", err)
	}
	t.Logf("the innocent client connected and ran a plan in %v", time.Since(start))
}
