package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestInsightsOfARunBelongToItsCaller: a run that fails with a tool error
// leaves an insight of the tool (the error and the arguments), which
// belongs to the caller that ran it, like the run's record: another token
// does not read it in orchestra://insights.
func TestInsightsOfARunBelongToItsCaller(t *testing.T) {
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
	plan := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "json_query",
		"arguments": map[string]any{"query": `error("alpha's query went wrong")`, "input": map[string]any{}}}}}}
	if res, _ := servertest.Call(t, alpha, plan, nil); !res.IsError {
		t.Fatal("the failing plan succeeded")
	}
	read := func(cs *mcp.ClientSession) string {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.InsightsURI})
		if err != nil {
			t.Fatal(err)
		}
		return res.Contents[0].Text
	}
	if text := read(alpha); !strings.Contains(text, `"tool": "json_query"`) || !strings.Contains(text, "alpha's query went wrong") {
		t.Errorf("alpha's insights lack the tool error:\n%s", text)
	}
	if text := read(beta); strings.Contains(text, "json_query") {
		t.Errorf("beta reads alpha's insights:\n%s", text)
	}
}
