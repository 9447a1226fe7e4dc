package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestNoTokenPassthrough: the caller's credential authenticates it to
// orchestra and goes no further. Plans and direct calls reach an HTTP
// downstream (which records every request) and a stdio one; no header or
// body of a downstream request, no stdio _meta, and no stdio process
// environment or command line holds the caller's token, while the
// downstream's own configured Authorization arrives intact.
func TestNoTokenPassthrough(t *testing.T) {
	const callerToken, ownToken = "alice-secret-token", "downstream-own-secret"
	var mu sync.Mutex
	var dumps []string
	ds := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	mcp.AddTool(ds, &mcp.Tool{Name: "echo", Description: "Returns its text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, struct {
			Text string `json:"text"`
		}, error) {
			return nil, struct {
				Text string `json:"text"`
			}{in.Text}, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ds }, nil)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true) // restores the body
		mu.Lock()
		dumps = append(dumps, string(dump)+"\n"+r.URL.String())
		mu.Unlock()
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(downstream.Close)

	cfg := tenantConfig(t)
	cfg.Tenants = nil
	cfg.MCPServers = map[string]mcpserver.ServerConfig{
		"d":  {URL: downstream.URL, Headers: map[string]string{"Authorization": "Bearer " + ownToken}},
		"fx": {Command: fixture(t)},
	}
	app := newApp(t, cfg)
	waitTools(t, app, "d__echo", "fx__meta")
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, callerToken)

	res, env := servertest.Call(t, alice, map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "e", "tool": "d__echo", "arguments": map[string]any{"text": "hi"}},
		map[string]any{"id": "m", "tool": "fx__meta", "arguments": map[string]any{}},
	}}}, nil)
	if !env.Artifact.Success {
		t.Fatalf("the plan failed: %+v", env.Artifact)
	}
	// A direct call, where the tool is listed.
	alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "d__echo", Arguments: map[string]any{"text": "direct"}})

	out, _ := json.Marshal(res.StructuredContent)
	if strings.Contains(string(out), callerToken) {
		t.Errorf("the caller's token is in the result (the stdio server's _meta or output): %s", out)
	}
	mu.Lock()
	all := strings.Join(dumps, "\n----\n")
	mu.Unlock()
	if strings.Contains(all, callerToken) {
		t.Errorf("the caller's token reached the HTTP downstream:\n%s", all)
	}
	if !strings.Contains(all, "Bearer "+ownToken) {
		t.Errorf("the downstream's own Authorization did not arrive:\n%.2000s", all)
	}
	for _, st := range app.Downstream() {
		if st.PID <= 0 {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			data, err := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/" + f)
			if err != nil {
				continue // not Linux, or gone
			}
			if strings.Contains(string(data), callerToken) {
				t.Errorf("the stdio downstream's %s holds the caller's token", f)
			}
		}
	}
}
