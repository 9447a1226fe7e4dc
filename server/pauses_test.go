package server_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
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

// TestResumeKeepsStepsAndResponse: the steps a resume reuses keep the
// exec ids they ran with (read back from the execution records), and the
// resume's own "response" decides the shape of its answer.
func TestResumeKeepsStepsAndResponse(t *testing.T) {
	cs := connectObs(t, appWithStore(t, filepath.Join(t.TempDir(), "o.db"), nil), nil)
	plan := map[string]any{
		"client_tools": []any{map[string]any{"name": "approve"}},
		"plan": map[string]any{"steps": []any{
			jq("read", 1),
			map[string]any{"id": "ok", "tool": "approve", "arguments": map[string]any{}},
			jq("after", 2),
		}},
	}
	_, paused := servertest.Call(t, cs, plan, nil)
	if paused.Artifact.Status != "awaiting_client" || paused.Artifact.Steps[0].ExecID == "" {
		t.Fatalf("status %s, first step %+v", paused.Artifact.Status, paused.Artifact.Steps[0])
	}
	resume := map[string]any{"resume": map[string]any{"exec_id": paused.ArtifactID, "results": map[string]any{"ok": map[string]any{"yes": true}}}, "response": "full"}
	res, env := servertest.Call(t, cs, resume, nil)
	if env.Artifact.Status != "success" {
		t.Fatalf("the resume: %+v", env.Artifact)
	}
	if got, want := env.Artifact.Steps[0].ExecID, paused.Artifact.Steps[0].ExecID; got != want {
		t.Errorf("the reused step has exec_id %q, want the %q it ran with", got, want)
	}
	if env.Artifact.Steps[2].ExecID == "" {
		t.Errorf("the step the resume ran has no exec_id")
	}
	if len(res.Content) != 2 || env.Artifact.Plan == nil {
		t.Errorf(`the resume asked for "response": "full" and got %d content blocks, plan %v`, len(res.Content), env.Artifact.Plan)
	}

	// And a compact one, on a run that failed and is resumed.
	failing := map[string]any{"plan": map[string]any{"steps": []any{
		jq("first", 1),
		map[string]any{"id": "bad", "tool": "json_query", "arguments": map[string]any{"query": `"no" | error`, "input": map[string]any{}}},
	}}}
	_, failed := servertest.Call(t, cs, failing, nil)
	if failed.Artifact.Status != "failed" {
		t.Fatalf("status %s", failed.Artifact.Status)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: map[string]any{"resume": map[string]any{"exec_id": failed.ArtifactID}, "response": "full"}})
	if err != nil {
		t.Fatal(err)
	}
	again := servertest.Decode(t, res)
	if got, want := again.Artifact.Steps[0].ExecID, failed.Artifact.Steps[0].ExecID; got != want || got == "" {
		t.Errorf("the reused step of a failed run has exec_id %q, want %q", got, want)
	}
}
