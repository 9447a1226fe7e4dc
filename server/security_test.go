package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func authConfig(t *testing.T) *config.Config {
	t.Setenv("ORCHESTRA_TEST_TOKENS", "alpha-token, beta-token")
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# one a line\n\nfile-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Server.Auth = config.Auth{TokensEnv: "ORCHESTRA_TEST_TOKENS", TokensFile: file}
	return cfg
}

// TestHTTPAuth: without a token or with a wrong one, /mcp answers 401
// with WWW-Authenticate and runs nothing; tokens from the environment and
// from the file open sessions; a session cannot be used with another
// token; /healthz stays open.
func TestHTTPAuth(t *testing.T) {
	p := &probe{}
	app := newApp(t, authConfig(t), p.tool(t, "probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"

	for _, tc := range []struct {
		name, header, wantAuth string
	}{
		{"no token", "", `Bearer realm="orchestra"`},
		{"wrong token", "Bearer gamma-token", `error="invalid_token"`},
		{"prefix of a token", "Bearer alpha", `error="invalid_token"`},
		{"basic scheme", "Basic YWxwaGE6dG9rZW4=", `Bearer realm="orchestra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.header != "" {
				h["Authorization"] = tc.header
			}
			resp, body := post(t, url, initializeBody, h)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, tc.wantAuth) {
				t.Errorf("WWW-Authenticate = %q, want it to contain %q", got, tc.wantAuth)
			}
			if !strings.Contains(body, "server.auth") {
				t.Errorf("the 401 does not say how to fix it: %s", body)
			}
		})
	}
	for _, token := range []string{"alpha-token", "beta-token", "file-token"} {
		t.Run("token "+token, func(t *testing.T) {
			tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}
			cs, err := newClient().Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			servertest.StillServes(t, cs)
		})
	}
	t.Run("session of another token", func(t *testing.T) {
		resp, _ := post(t, url, initializeBody, map[string]string{"Authorization": "Bearer alpha-token"})
		sid := resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("no session id (status %d)", resp.StatusCode)
		}
		resp, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{
			"Authorization": "Bearer beta-token", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": v20251125,
		})
		if resp.StatusCode < 400 {
			t.Errorf("another token used alpha's session: status %d: %s", resp.StatusCode, body)
		}
	})
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d without a token, want 200", resp.StatusCode)
	}
	if n := p.calls.Load(); n != 0 {
		t.Errorf("the probe ran %d times", n)
	}
}

// TestAuthMisconfigured: auth that yields no token stops the server from
// starting, with a message naming the key.
func TestAuthMisconfigured(t *testing.T) {
	for name, auth := range map[string]config.Auth{
		"unset variable": {TokensEnv: "ORCHESTRA_TEST_NO_SUCH_VARIABLE"},
		"missing file":   {TokensFile: filepath.Join(t.TempDir(), "nope")},
		"empty file":     {TokensFile: os.DevNull},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Server.Auth = auth
			_, err := server.New(t.Context(), cfg, server.Options{})
			if err == nil || !strings.Contains(err.Error(), "server.auth") {
				t.Errorf("server.New: %v; want an error naming server.auth", err)
			}
		})
	}
}

// TestHTTPRateLimit: a client over its rate gets 429 with Retry-After;
// another client (another token) is not held back by it.
func TestHTTPRateLimit(t *testing.T) {
	cfg := authConfig(t)
	cfg.Server.RateLimit = config.RateLimit{RequestsPerSecond: 0.5, Burst: 3}
	app := newApp(t, cfg)
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	alpha := map[string]string{"Authorization": "Bearer alpha-token"}
	var limited *http.Response
	for i := range 10 {
		resp, body := post(t, srv.URL+"/mcp", ping, alpha)
		if resp.StatusCode == http.StatusTooManyRequests {
			limited = resp
			if i < 3 {
				t.Errorf("limited after %d requests; the burst is 3", i)
			}
			if !strings.Contains(body, "server.rate_limit") {
				t.Errorf("the 429 does not say what to do: %s", body)
			}
			break
		}
	}
	if limited == nil {
		t.Fatal("10 requests at once were never limited")
	}
	if s, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || s < 1 || s > 3 {
		t.Errorf("Retry-After = %q, want 1 to 3 seconds", limited.Header.Get("Retry-After"))
	}
	resp, body := post(t, srv.URL+"/mcp", ping, map[string]string{"Authorization": "Bearer beta-token"})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another client was limited too: %d %s", resp.StatusCode, body)
	}
	// Without a token the client is its address: the 401 is rate limited
	// too, so tokens cannot be guessed at full speed.
	var sawLimit bool
	for range 10 {
		resp, _ := post(t, srv.URL+"/mcp", ping, nil)
		if resp.StatusCode == http.StatusTooManyRequests {
			sawLimit = true
			break
		}
	}
	if !sawLimit {
		t.Error("unauthenticated requests from one address were never limited")
	}
}

// TestHTTPSessionIdleTimeout: an idle session is closed after
// server.session_timeout, and its id is then refused.
func TestHTTPSessionIdleTimeout(t *testing.T) {
	cfg := config.Default()
	idle := 100 * time.Millisecond
	cfg.Server.SessionTimeout = &idle
	app := newApp(t, cfg)
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	resp, _ := post(t, srv.URL+"/mcp", initializeBody, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": v20251125}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(2 * idle) // idle on purpose: the session must see no request
		resp, body := post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, h)
		if resp.StatusCode == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session still answers: %d %s", resp.StatusCode, body)
		}
	}
}

// TestBusy: beyond limits.max_concurrent_plans a call waits for a slot
// for limits.queue_timeout, then fails with busy naming the limit; a call
// runs once a slot is free.
func TestBusy(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxConcurrentPlans = 1
	cfg.Limits.QueueTimeout = time.Millisecond
	p := &probe{block: make(chan struct{}), started: make(chan struct{}, 1)}
	app := newApp(t, cfg, p.tool(t, "probe"))
	cs := connectInMemory(t, app, v20251125)
	done := make(chan *servertest.Envelope, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: plan(map[string]any{"tool": "probe", "arguments": map[string]any{"label": "a"}})})
		if err != nil || res.IsError {
			done <- nil
			return
		}
		done <- &servertest.Envelope{}
	}()
	<-p.started
	res, env := servertest.Call(t, cs, plan(map[string]any{"tool": "render", "arguments": map[string]any{"template": "x"}}), nil)
	if !res.IsError || len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeBusy {
		t.Errorf("a second plan while one runs with max_concurrent_plans 1: want busy; got:\n%s", servertest.Text(res))
	} else if !strings.Contains(env.Artifact.ValidationErrors[0].Message, "limits.max_concurrent_plans") {
		t.Errorf("the busy error does not name the limit: %s", env.Artifact.ValidationErrors[0].Message)
	}
	close(p.block)
	if got := <-done; got == nil {
		t.Error("the first plan failed")
	}
	servertest.StillServes(t, cs)
}

// TestGarbageTokensHitTheAddressLimit replays a break: a made-up
// JWT-shaped token got a rate-limit bucket of its own before it was
// verified, so a client that sent a fresh one each time was never
// limited and grew the limiter's state without bound. Nothing is kept per
// credential before it verifies now: requests that fail authentication
// are limited per address, and a valid caller from elsewhere is served.
func TestGarbageTokensHitTheAddressLimit(t *testing.T) {
	cfg := authConfig(t)
	cfg.Server.Auth.JWT = &config.JWT{Issuer: "https://auth.example.com", Audience: "https://orchestra.example.com/mcp", JWKSURL: "http://127.0.0.1:1/jwks"}
	cfg.Server.RateLimit = config.RateLimit{RequestsPerSecond: 0.5, Burst: 5}
	app := newApp(t, cfg)
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	limited := 0
	for i := range 50 {
		garbage := fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4%d.c2ln%d", i, i)
		resp, body := post(t, srv.URL+"/mcp", ping, map[string]string{"Authorization": "Bearer " + garbage})
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			limited++
			if !strings.Contains(body, "fail authentication") {
				t.Errorf("the 429 does not say what is limited: %s", body)
			}
		case http.StatusUnauthorized:
			if limited > 0 {
				t.Errorf("request %d was verified after the address's limit was reached", i)
			}
		default:
			t.Fatalf("a made-up token: %d %s", resp.StatusCode, body)
		}
	}
	if limited < 40 {
		t.Errorf("%d of 50 made-up tokens from one address were limited; the burst is 5", limited)
	}
	// A valid token is limited on its own bucket, not the address's.
	if resp, body := post(t, srv.URL+"/mcp", ping, map[string]string{"Authorization": "Bearer alpha-token"}); resp.StatusCode != http.StatusOK {
		t.Errorf("a valid token after the address's failures: %d %s", resp.StatusCode, body)
	}
}
