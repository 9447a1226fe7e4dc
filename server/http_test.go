package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/server/httpedge"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends a raw JSON-RPC POST to url with extra headers.
func post(t *testing.T, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func TestHTTPProtection(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			p := &probe{}
			app := newApp(t, nil, p.tool(t, "probe"))
			cs, srv := connectHTTP(t, app, server.HTTPOptions{Stateless: stateless}, v20251125)
			url := srv.URL + "/mcp"

			for _, tc := range []struct {
				name   string
				header map[string]string
				status int
			}{
				{"same origin", nil, http.StatusOK},
				{"DNS rebinding", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
				{"DNS rebinding with a port", map[string]string{"Host": "evil.example:80"}, http.StatusForbidden},
				{"cross-site POST", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
				{"cross-origin POST without Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
			} {
				t.Run(tc.name, func(t *testing.T) {
					resp, body := post(t, url, initializeBody, tc.header)
					if resp.StatusCode != tc.status {
						t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
					}
				})
			}
			servertest.StillServes(t, cs)
			if n := p.calls.Load(); n != 0 {
				t.Errorf("the probe ran %d times", n)
			}
		})
	}
}

func TestHTTPHealthz(t *testing.T) {
	app := newApp(t, nil)
	srv := httptestServer(t, app, server.HTTPOptions{})
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"status":"ok"`) {
		t.Errorf("GET /healthz = %d %s", resp.StatusCode, data)
	}
}

// TestHTTPJWTWiring: with server.auth.jwt the app's /mcp asks for a
// bearer token and names the protected resource metadata, which it serves
// at the well-known path and at that path followed by the resource's
// (RFC 9728). The tokens themselves are httpedge's tests.
func TestHTTPJWTWiring(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Auth.JWT = &config.JWT{Issuer: "https://auth.example.com", Audience: "https://orchestra.example.com/mcp", JWKSURL: "http://127.0.0.1:1/keys"}
	srv := httptestServer(t, newApp(t, cfg), server.HTTPOptions{})
	resp, body := post(t, srv.URL+"/mcp", initializeBody, nil)
	if want := `resource_metadata="` + srv.URL + httpedge.ProtectedResourcePath + `"`; resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
		t.Errorf("POST /mcp without a token: %d, WWW-Authenticate %q, %s; want 401 naming %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
	}
	for _, path := range []string{httpedge.ProtectedResourcePath, httpedge.ProtectedResourcePath + "/mcp"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"resource":"https://orchestra.example.com/mcp"`) {
			t.Errorf("GET %s = %d %s", path, resp.StatusCode, data)
		}
	}
}

// TestHTTPMalformedJSON sends bodies that are not JSON-RPC and checks that
// each gets a clear error and that the server keeps serving.
func TestHTTPMalformedJSON(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			app := newApp(t, nil)
			cs, srv := connectHTTP(t, app, server.HTTPOptions{Stateless: stateless}, v20251125)
			for _, body := range []string{`{"jsonrpc":"2.0","id":1,"method":`, `not json at all`, `[]`, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":"nope"}`} {
				resp, text := post(t, srv.URL+"/mcp", body, nil)
				if resp.StatusCode < 400 || resp.StatusCode >= 500 {
					t.Errorf("POST %q: status %d, want a 4xx: %s", body, resp.StatusCode, text)
				}
				if strings.TrimSpace(text) == "" {
					t.Errorf("POST %q: empty error body", body)
				}
			}
			servertest.StillServes(t, cs)
		})
	}
}

// hugePlan returns arguments of about n bytes.
func hugePlan(n int) map[string]any {
	return map[string]any{
		"plan":     map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "x"}}}},
		"bindings": map[string]any{"blob": strings.Repeat("a", n)},
	}
}

func smallLimit() *config.Config {
	cfg := config.Default()
	cfg.Server.MaxRequestBytes = 64 << 10
	return cfg
}

// TestToolRequestLimit sends agent_orchestrate more than
// server.max_request_bytes over a transport without a body limit.
func TestToolRequestLimit(t *testing.T) {
	app := newApp(t, smallLimit())
	cs := connectInMemory(t, app, v20260728)
	res, env := servertest.Call(t, cs, hugePlan(100<<10), nil)
	if !res.IsError || len(env.Artifact.ValidationErrors) != 1 {
		t.Fatalf("isError = %v, validation errors %+v; want one too_large", res.IsError, env.Artifact.ValidationErrors)
	}
	i := env.Artifact.ValidationErrors[0]
	if i.Code != orchestrate.CodeTooLarge || !strings.Contains(i.Message, "server.max_request_bytes") {
		t.Errorf("got %+v; want %s naming server.max_request_bytes", i, orchestrate.CodeTooLarge)
	}
	servertest.StillServes(t, cs)
}

// TestHTTPBodyLimit sends more than server.max_request_bytes over HTTP: the
// body limit answers 413 and the session goes on.
func TestHTTPBodyLimit(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			app := newApp(t, smallLimit())
			cs, srv := connectHTTP(t, app, server.HTTPOptions{Stateless: stateless}, v20251125)

			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: hugePlan(100 << 10)})
			if err == nil {
				t.Fatalf("a request over the body limit succeeded")
			}
			if !strings.Contains(err.Error(), "Request Entity Too Large") && !strings.Contains(err.Error(), "413") && !strings.Contains(err.Error(), "max_request_bytes") {
				t.Errorf("error %q does not say the request is too large", err)
			}
			servertest.StillServes(t, cs)

			resp, body := post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("a", 100<<10)+`"}}`, nil)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413: %s", resp.StatusCode, body)
			}
			if !strings.Contains(body, "server.max_request_bytes") {
				t.Errorf("the 413 body does not say how to fix it: %s", body)
			}
			servertest.StillServes(t, cs)
		})
	}
}

func httptestServer(t *testing.T, app *server.App, opts server.HTTPOptions) *httptestSrv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: app.HTTPHandler(opts)}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return &httptestSrv{URL: "http://" + ln.Addr().String()}
}

type httptestSrv struct{ URL string }

func (*httptestSrv) Client() *http.Client { return http.DefaultClient }

// signalHandler is a slog handler that closes a channel when a record with
// a given message is logged.
type signalHandler struct {
	msg  string
	once *sync.Once
	ch   chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// serveGraceful starts ServeHTTP on a loopback listener and returns a
// connected session, the serve cancel func, a channel closed once shutdown
// has begun, and the channel ServeHTTP's error arrives on.
func serveGraceful(t *testing.T, p *probe, grace time.Duration, stateless bool) (*mcp.ClientSession, context.CancelFunc, <-chan struct{}, <-chan error) {
	t.Helper()
	cfg := config.Default()
	cfg.Server.ShutdownGrace = grace
	shutdown := make(chan struct{})
	log := slog.New(signalHandler{msg: "shutting down", once: new(sync.Once), ch: shutdown})
	app, err := server.New(t.Context(), cfg, server.Options{Logger: log, Tools: []registry.Tool{p.tool(t, "slow")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served := make(chan error, 1)
	go func() { served <- app.ServeHTTP(ctx, ln, server.HTTPOptions{Stateless: stateless}) }()
	// The listener is bound: the client can connect right away.
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp"}
	cs, err := newClient().Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cancel, shutdown, served
}

func TestGracefulShutdownLetsPlansFinish(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			p := &probe{block: make(chan struct{}), started: make(chan struct{}, 1)}
			cs, cancel, shutdown, served := serveGraceful(t, p, 30*time.Second, stateless)

			got := make(chan callResult, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: map[string]any{"plan": map[string]any{"steps": []any{
					map[string]any{"tool": "slow", "arguments": map[string]any{"label": "done"}},
				}}}})
				got <- callResult{res, err}
			}()
			<-p.started
			cancel()
			<-shutdown
			close(p.block) // the plan finishes during the grace period
			r := (<-got).decode(t)
			if r.res.IsError || r.env.Artifact.Status != orchestrate.StatusSuccess {
				t.Errorf("the in-flight plan did not succeed:\n%s", servertest.Text(r.res))
			}
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("ServeHTTP: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ServeHTTP did not return after the plans finished")
			}
		})
	}
}

func TestGracefulShutdownCancelsAfterGrace(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateful", true: "stateless"}[stateless], func(t *testing.T) {
			p := &probe{block: make(chan struct{}), started: make(chan struct{}, 1)}
			defer close(p.block)
			cs, cancel, shutdown, served := serveGraceful(t, p, 50*time.Millisecond, stateless)

			got := make(chan callResult, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: map[string]any{"plan": map[string]any{"steps": []any{
					map[string]any{"id": "forever", "tool": "slow", "arguments": map[string]any{"label": "never"}},
				}}}})
				got <- callResult{res, err}
			}()
			<-p.started
			start := time.Now()
			cancel()
			<-shutdown
			r := (<-got).decode(t)
			if !r.res.IsError || r.env.Artifact.Success {
				t.Errorf("a plan cancelled at shutdown succeeded:\n%s", servertest.Text(r.res))
			}
			if len(r.env.Artifact.Steps) != 1 || r.env.Artifact.Steps[0].Status != orchestrate.StatusCancelled {
				t.Errorf("steps = %+v; want the one step cancelled", r.env.Artifact.Steps)
			}
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("ServeHTTP: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("shutdown took %v with a grace period of 50ms", d)
			}
		})
	}
}

// callResult is the outcome of a call made on another goroutine.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

type decoded struct {
	res *mcp.CallToolResult
	env *servertest.Envelope
}

func (c callResult) decode(t *testing.T) decoded {
	t.Helper()
	if c.err != nil {
		t.Fatalf("calling %s: %v", orchestrate.ToolName, c.err)
	}
	return decoded{c.res, servertest.Decode(t, c.res)}
}
