package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// droppable is an HTTP client whose connections the test can cut.
type droppable struct {
	token string
	mu    sync.Mutex
	conns []net.Conn
	tr    *http.Transport
}

func newDroppable(token string) *droppable {
	d := &droppable{token: token}
	var dialer net.Dialer
	d.tr = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			d.mu.Lock()
			d.conns = append(d.conns, c)
			d.mu.Unlock()
		}
		return c, err
	}}
	return d
}

func (d *droppable) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+d.token)
	return d.tr.RoundTrip(r)
}

// drop closes every connection of the client, as a network failure does.
func (d *droppable) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.tr.CloseIdleConnections()
}

// idempotentReplica is one orchestra serving HTTP: its server, and a
// channel signalled when a call waits for the first call of its key.
type idempotentReplica struct {
	srv     *httptest.Server
	waiting chan struct{}
}

func newIdempotentReplica(t *testing.T, cfg *config.Config, storePath string, p *probe) idempotentReplica {
	waiting := make(chan struct{})
	app, err := server.New(t.Context(), cfg, server.Options{Tools: []registry.Tool{p.tool(t, "charge")}, Version: "test", Store: storePath,
		Logger: slog.New(signalHandler{msg: "waiting for the first call of an idempotency key", once: &sync.Once{}, ch: waiting})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	return idempotentReplica{srv: srv, waiting: waiting}
}

// idempotentCalls: alice's call with an idempotency key starts a run whose
// tool blocks; her connection drops; her retry with the key (on replica
// second) waits for the first run, which goes on to its end, and gets its
// envelope; another retry later gets the same; the tool ran once; the key
// with another input is refused, and bob's use of the same key is his own.
func idempotentCalls(t *testing.T, first, second idempotentReplica, p *probe) {
	input := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"id": "c", "tool": "charge", "arguments": map[string]any{"label": "€10"}}}},
		"idempotency_key": "order-42", "response": "full"}

	lost := newDroppable("alice-secret-token")
	cs, err := newClient().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: first.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: lost}},
		&mcp.ClientSessionOptions{ProtocolVersion: v20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	firstDone := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: input})
		firstDone <- err
	}()
	awaitValue(t, p.started, "the first call's tool to start") // the run is in the tool, which waits for the test
	lost.drop()
	if err := awaitValue(t, firstDone, "the first call to fail"); err == nil {
		t.Fatal("the first call answered although its connection was cut")
	}

	type answer struct {
		res *mcp.CallToolResult
		env *servertest.Envelope
	}
	retried := make(chan answer, 1)
	retry := connectAs(t, second.srv, "alice-secret-token")
	go func() {
		res, env := servertest.Call(t, retry, input, nil)
		retried <- answer{res, env}
	}()
	awaitValue(t, second.waiting, "the retry to wait for the first run")
	close(p.block) // which now ends
	got := awaitValue(t, retried, "the retry's answer")
	if got.env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("the retry got status %s, errors %v: the first run did not outlive its connection", got.env.Artifact.Status, got.env.Artifact.Errors)
	}
	again, _ := servertest.Call(t, connectAs(t, first.srv, "alice-secret-token"), input, nil)
	a, _ := json.Marshal(got.res.StructuredContent)
	b, _ := json.Marshal(again.StructuredContent)
	if string(a) != string(b) {
		t.Errorf("two repeats got different envelopes:\n%s\n%s", a, b)
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times; want 1", n)
	}

	other := map[string]any{"plan": input["plan"], "idempotency_key": "order-42", "bindings": map[string]any{"x": 1}}
	_, env := servertest.Call(t, retry, other, nil)
	if env.Artifact.Success || len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeIdempotencyConflict {
		t.Errorf("the key with another input: %+v %+v", env.Artifact.Status, env.Artifact.ValidationErrors)
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("the conflicting call ran the tool (%d calls)", n)
	}
	_, env = servertest.Call(t, connectAs(t, second.srv, "bob-secret-token"), other, nil)
	if !env.Artifact.Success || p.calls.Load() != 2 {
		t.Errorf("bob's call with alice's key did not run as his own: %s, %d calls", env.Artifact.Status, p.calls.Load())
	}
}

// TestIdempotentCallsOverHTTP: idempotentCalls on one orchestra.
func TestIdempotentCallsOverHTTP(t *testing.T) {
	p := &probe{started: make(chan struct{}, 1), block: make(chan struct{})}
	r := newIdempotentReplica(t, namedTokensConfig(t, "http://127.0.0.1:1/v1"), "memory", p)
	idempotentCalls(t, r, r, p)
}

// TestIdempotentCallsAcrossReplicas: idempotentCalls on two orchestras
// sharing one PostgreSQL database, the first call on one and its retries
// on the other.
func TestIdempotentCallsAcrossReplicas(t *testing.T) {
	url := pgtest.URL(t)
	p := &probe{started: make(chan struct{}, 1), block: make(chan struct{})}
	cfg := namedTokensConfig(t, "http://127.0.0.1:1/v1")
	idempotentCalls(t, newIdempotentReplica(t, cfg, url, p), newIdempotentReplica(t, cfg, url, p), p)
}

// hangBound bounds a wait that only a defect would make endless.
const hangBound = 2 * time.Minute

// awaitValue waits for ch to yield or close, failing the test after
// hangBound, and returns what it yielded.
func awaitValue[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangBound):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}
