//go:build linux

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

// TestHTTPConnectionCapPerClient holds many stalled connections from one
// address: those over server.max_connections_per_client are answered 503
// at once, and a client from another address is served.
func TestHTTPConnectionCapPerClient(t *testing.T) {
	cfg := config.Default()
	cfg.Server.MaxConnectionsPerClient = 8
	app := newApp(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- app.ServeHTTP(ctx, ln, server.HTTPOptions{}) }()
	defer func() {
		cancel()
		<-served
	}()
	addr := ln.Addr().String()

	// The attacker: 127.0.0.2, also this machine.
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var refused int
	for i := range 40 {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		// Headers without the body: the connection stalls.
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", addr)
		if i >= cfg.Server.MaxConnectionsPerClient {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("connection %d over the cap: no answer: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "server.max_connections_per_client") {
				t.Fatalf("connection %d over the cap: status %d: %s", i, resp.StatusCode, body)
			}
			refused++
		}
	}
	if refused != 40-cfg.Server.MaxConnectionsPerClient {
		t.Errorf("refused %d connections", refused)
	}
	cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("a client from another address: %v", err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("a client from another address: %v", err)
	}
}
