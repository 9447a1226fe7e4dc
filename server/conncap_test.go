package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
)

// TestHTTPHeaderTimeout sends the start of a request's headers and stops:
// the server closes the connection once server.header_timeout has passed,
// so a client that never finishes its headers does not hold it.
func TestHTTPHeaderTimeout(t *testing.T) {
	cfg := config.Default()
	cfg.Server.HeaderTimeout = 200 * time.Millisecond
	addr := serveLimited(t, newApp(t, cfg), server.HTTPOptions{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", addr)
	// Far past the header timeout: reaching it means the server kept the
	// connection.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept a connection whose headers never ended")
	}
}

// TestHTTPConnectionCap holds server.max_connections stalled connections:
// the next one is answered 503 naming the limit at once, and once they
// close a client is served again.
func TestHTTPConnectionCap(t *testing.T) {
	cfg := config.Default()
	cfg.Server.MaxConnections = 4
	addr := serveLimited(t, newApp(t, cfg), server.HTTPOptions{})
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for i := range cfg.Server.MaxConnections + 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		stalled = append(stalled, c)
		// Headers without the body: the connection stalls.
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", addr)
	}
	over := stalled[len(stalled)-1]
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection over the cap: no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "server.max_connections") {
		t.Fatalf("the connection over the cap: status %d: %s; want 503 naming server.max_connections", resp.StatusCode, body)
	}
	for _, c := range stalled {
		c.Close()
	}
	stalled = nil
	// The server sees the closed connections as it reads them: a client
	// may be refused until it has.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
		if err == nil {
			_, err = cs.ListTools(t.Context(), nil)
			cs.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client served after the stalled connections closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
