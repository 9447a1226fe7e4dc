package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
)

// serveLimited serves app with ServeHTTP on a loopback listener until the
// test ends and returns its address.
func serveLimited(t *testing.T, app *server.App, opts server.HTTPOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- app.ServeHTTP(ctx, ln, opts) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return ln.Addr().String()
}

// TestHTTPBodyTimeout sends a request whose body stalls: the server
// answers 408 within server.body_timeout and closes the connection.
func TestHTTPBodyTimeout(t *testing.T) {
	cfg := config.Default()
	cfg.Server.BodyTimeout = 200 * time.Millisecond
	addr := serveLimited(t, newApp(t, cfg), server.HTTPOptions{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", addr)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "server.body_timeout") {
		t.Fatalf("status %d: %s; want 408 naming server.body_timeout", resp.StatusCode, body)
	}
}

// TestHTTPSessionCap opens sessions up to server.max_sessions: the next
// initialize is refused with a JSON-RPC error naming the limit, and a
// closed session makes room again.
func TestHTTPSessionCap(t *testing.T) {
	cfg := config.Default()
	cfg.Server.MaxSessions = 2
	addr := serveLimited(t, newApp(t, cfg), server.HTTPOptions{})
	url := "http://" + addr + "/mcp"
	var sessions []*mcp.ClientSession
	for range 2 {
		cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	resp, body := post(t, url, initializeBody, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "server.max_sessions") || !strings.Contains(body, `"id":1`) {
		t.Fatalf("status %d: %s; want 503 with a JSON-RPC error for id 1 naming server.max_sessions", resp.StatusCode, body)
	}
	sessions[0].Close()
	cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
	if err != nil {
		t.Fatalf("a session after one was closed: %v", err)
	}
	cs.Close()
}
