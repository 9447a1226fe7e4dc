package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestResumeIsTheCallersOwn: a paused run belongs to the token that
// started it; another token's resume is refused as unknown_run and the run
// stays paused for its owner, who resumes it.
func TestResumeIsTheCallersOwn(t *testing.T) {
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
	plan := map[string]any{
		"client_tools": []any{map[string]any{"name": "approve"}},
		"plan":         map[string]any{"steps": []any{map[string]any{"id": "ok", "tool": "approve", "arguments": map[string]any{}}}},
	}
	_, env := servertest.Call(t, alpha, plan, nil)
	if env.Artifact.Status != "awaiting_client" {
		t.Fatalf("status %s", env.Artifact.Status)
	}
	resume := map[string]any{"resume": map[string]any{"exec_id": env.ArtifactID, "results": map[string]any{"ok": map[string]any{"yes": true}}}}
	_, got := servertest.Call(t, beta, resume, nil)
	if v := got.Artifact.ValidationErrors; len(v) != 1 || v[0].Code != "unknown_run" {
		t.Fatalf("beta resumed alpha's run: %+v", got.Artifact)
	}
	_, got = servertest.Call(t, alpha, resume, nil)
	if got.Artifact.Status != "success" || got.ArtifactID != env.ArtifactID {
		t.Fatalf("alpha's resume: %+v", got.Artifact)
	}
}
