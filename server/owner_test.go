package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestRecordsBelongToTheirCaller: with bearer tokens, any token could read
// every run, bindings and outputs included. A run now belongs to the token
// that started it: another token can neither read nor list it, while the
// machine's own callers (stdio, the CLI) see every run.
func TestRecordsBelongToTheirCaller(t *testing.T) {
	app := newApp(t, authConfig(t))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	connect := func(token string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}
		cs, err := newClient().Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alpha, beta := connect("alpha-token"), connect("beta-token")
	plan := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "{{.s}}", "values": map[string]any{"s": "alpha's secret output"}}}}}}
	res, env := servertest.Call(t, alpha, plan, nil)
	execID := env.ArtifactID
	uri := server.RecordURI(execID)
	if data, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(data), `"user_id":"token:`) {
		t.Errorf("the envelope's user_id is not the token's id: %s", data)
	}

	read := func(cs *mcp.ClientSession, uri string) (string, error) {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	if text, err := read(alpha, uri); err != nil || !strings.Contains(text, "alpha's secret output") {
		t.Errorf("alpha reading its own run: %v\n%.500s", err, text)
	}
	if text, err := read(beta, uri); err == nil {
		t.Errorf("beta read alpha's run:\n%.500s", text)
	}
	if text, err := read(beta, server.ExecutionsURI); err != nil || strings.Contains(text, execID) {
		t.Errorf("beta's list shows alpha's run (%v):\n%.500s", err, text)
	}
	if text, err := read(alpha, server.ExecutionsURI); err != nil || !strings.Contains(text, execID) {
		t.Errorf("alpha's list lacks its run (%v):\n%.500s", err, text)
	}
	// The machine's own view: a client without a credential sees it all.
	local := connectInMemory(t, app, v20251125)
	if text, err := read(local, uri); err != nil || !strings.Contains(text, "alpha's secret output") {
		t.Errorf("a stdio client reading the run: %v", err)
	}
}
