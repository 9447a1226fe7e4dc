package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"crypto/rsa"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/testutil/jwttest"
)

// withBearer sends every request with a bearer token.
type withBearer struct{ token string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestJWTSubjectIsNotAStaticToken replays a break: a JWT whose sub equals
// a static token's name read and resumed that token's runs, since both
// were owned by the bare name. Owners are now namespaced by how the caller
// authenticated: the JWT caller neither reads, lists nor resumes the
// token's runs, nor takes over its HTTP session, and its own runs are its
// own; both keep "alice" as the user id shown.
func TestJWTSubjectIsNotAStaticToken(t *testing.T) {
	is := jwttest.New(t)
	k1 := jwttest.NewKey(t)
	is.Publish(map[string]*rsa.PrivateKey{"k1": k1})
	t.Setenv("ORCHESTRA_TEST_ALICE", "alice-static-token")
	cfg := config.Default()
	cfg.Server.Auth = config.Auth{
		Tokens: []config.NamedToken{{Name: "alice", TokenEnv: "ORCHESTRA_TEST_ALICE"}},
		JWT:    &config.JWT{Issuer: jwttest.Issuer, Audience: jwttest.Audience, JWKSURL: is.URL()},
	}
	app, err := New(t.Context(), cfg, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(app.HTTPHandler(HTTPOptions{}))
	t.Cleanup(srv.Close)
	connect := func(token string) *mcp.ClientSession {
		t.Helper()
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: withBearer{token}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	jwtAlice := jwttest.Sign(t, "k1", k1, jwttest.Claims(func(c jwt.MapClaims) { c["sub"] = "alice" }))
	static, impostor := connect("alice-static-token"), connect(jwtAlice)

	call := func(cs *mcp.ClientSession, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res.StructuredContent)
		var env map[string]any
		json.Unmarshal(data, &env)
		return env
	}
	secret := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "{{.s}}", "values": map[string]any{"s": "alice's secret"}}}}}}
	env := call(static, secret)
	execID, _ := env["artifact_id"].(string)
	if md, _ := env["_metadata"].(map[string]any); md["user_id"] != "alice" {
		t.Errorf("the static token's user id is %v, want alice", md["user_id"])
	}
	paused := call(static, map[string]any{
		"plan":         map[string]any{"steps": []any{map[string]any{"id": "ok", "tool": "approve", "arguments": map[string]any{}}}},
		"client_tools": []any{map[string]any{"name": "approve"}},
	})
	pausedID, _ := paused["artifact"].(map[string]any)["resume"].(map[string]any)["exec_id"].(string)
	if pausedID == "" {
		t.Fatalf("the plan did not pause: %v", paused)
	}

	read := func(cs *mcp.ClientSession, uri string) (string, error) {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	if text, err := read(impostor, RecordURI(execID)); err == nil {
		t.Errorf("a JWT whose sub is alice read the static token's run:\n%.300s", text)
	}
	if text, err := read(impostor, ExecutionsURI); err != nil || strings.Contains(text, execID) || strings.Contains(text, pausedID) {
		t.Errorf("the JWT caller's list shows the static token's runs (%v):\n%.300s", err, text)
	}
	resumed := call(impostor, map[string]any{"resume": map[string]any{"exec_id": pausedID, "results": map[string]any{"ok": map[string]any{"approved": true}}}})
	if a, _ := resumed["artifact"].(map[string]any); a["status"] == "success" {
		t.Errorf("the JWT caller resumed the static token's paused run: %v", resumed)
	}
	if text, err := read(static, RecordURI(execID)); err != nil || !strings.Contains(text, "alice's secret") {
		t.Errorf("the static token reading its own run: %v", err)
	}
	// The JWT caller's own run is its own, shown as alice too.
	mine := call(impostor, secret)
	if md, _ := mine["_metadata"].(map[string]any); md["user_id"] != "alice" {
		t.Errorf("the JWT caller's user id is %v, want its sub", md["user_id"])
	}
	if _, err := read(static, RecordURI(mine["artifact_id"].(string))); err == nil {
		t.Error("the static token read the JWT caller's run")
	}
	// Nor may the JWT caller use the static token's HTTP session.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", static.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+jwtAlice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("the JWT caller was served on the static token's session")
	}
	// The records keep the namespaced owner and the user id shown.
	run, _, err := app.store.Get(t.Context(), execID)
	if err != nil || run.Owner != "static:alice" || run.UserID != "alice" {
		t.Errorf("the record's owner %q and user id %q (%v)", run.Owner, run.UserID, err)
	}
}
