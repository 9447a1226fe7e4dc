package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// selfPlan is a plan whose one step posts to url a tools/call of
// agent_orchestrate with the same plan, passed along in its bindings: a
// recursion through HTTP that nothing in the plan bounds.
func selfPlan(url string) map[string]any {
	var plan map[string]any
	_ = json.Unmarshal([]byte(`{"steps":[{"id":"again","tool":"http_request","arguments":{
		"method":"POST","url":"`+url+`",
		"headers":{"Accept":"application/json, text/event-stream","Content-Type":"application/json"},
		"body":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_orchestrate",
			"arguments":{"plan":"$bindings.p","bindings":{"p":"$bindings.p"}}}}}}]}`), &plan)
	return plan
}

func privateHTTPConfig() *config.Config {
	cfg := config.Default()
	cfg.Builtins.HTTP.AllowedHosts = []string{"*"}
	cfg.Builtins.HTTP.AllowPrivateNetworks = true
	return cfg
}

// TestRecursionThroughHTTPStopsAtMaxDepth: a plan that posts itself to an
// orchestra's /mcp, again and again, used to recurse at depth 0 at every
// level (233 plans from one request). http_request carries the depth in a
// header the plan cannot override, so the chain stops at max_depth.
func TestRecursionThroughHTTPStopsAtMaxDepth(t *testing.T) {
	app := newApp(t, privateHTTPConfig())
	var calls atomic.Int64
	h := app.HTTPHandler(server.HTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			calls.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cs := connectInMemory(t, app, v20251125)
	plan := selfPlan(srv.URL + "/mcp")
	_, env := servertest.Call(t, cs, map[string]any{"plan": plan, "bindings": map[string]any{"p": plan}}, nil)
	max := int64(app.Config.Limits.MaxDepth)
	if n := calls.Load(); n != max {
		t.Errorf("the server received %d nested orchestrations; want %d (depths 1 to %d, the last refused)", n, max, max)
	}
	if text, _ := json.Marshal(env); !bytes.Contains(text, []byte("depth_exceeded")) {
		t.Errorf("the innermost answer does not say depth_exceeded:\n%.2000s", text)
	}
}

// TestOwnListenerRefusedOverHTTP: a server that listens refuses a plan's
// request to its own address, private networks allowed or not.
func TestOwnListenerRefusedOverHTTP(t *testing.T) {
	app := newApp(t, privateHTTPConfig())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- app.ServeHTTP(ctx, ln, server.HTTPOptions{}) }()
	t.Cleanup(func() {
		stop()
		<-served
	})
	cs := connectInMemory(t, app, v20251125)
	_, env := servertest.Call(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{
		"tool": "http_request", "arguments": map[string]any{"url": "http://" + ln.Addr().String() + "/healthz"},
	}}}}, nil)
	if len(env.Artifact.Steps) != 1 || env.Artifact.Steps[0].Error == nil || !strings.Contains(env.Artifact.Steps[0].Error.Message, "own address") {
		data, _ := json.Marshal(env)
		t.Errorf("a request to the server's own address was not refused:\n%s", data)
	}
}
