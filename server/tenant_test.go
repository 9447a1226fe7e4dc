package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// tenantConfig has two tenants: a (alice) may call the probes a_*, b (bob)
// the probes b_*; ops holds a named token in no tenant.
func tenantConfig(t *testing.T) *config.Config {
	t.Setenv("ALICE_TOKEN", "alice-secret-token")
	t.Setenv("BOB_TOKEN", "bob-secret-token")
	t.Setenv("OPS_TOKEN", "ops-secret-token")
	cfg := config.Default()
	cfg.Server.Auth = config.Auth{Tokens: []config.NamedToken{
		{Name: "alice", TokenEnv: "ALICE_TOKEN"},
		{Name: "bob", TokenEnv: "BOB_TOKEN"},
		{Name: "ops", TokenEnv: "OPS_TOKEN"},
	}}
	no := false
	cfg.Tenants = map[string]config.Tenant{
		"a": {Match: config.TenantMatch{Tokens: []string{"alice"}}, Tools: []string{"a_*"}},
		"b": {Match: config.TenantMatch{Tokens: []string{"bob"}}, Tools: []string{"b_*"}, PlanningEnabled: &no},
	}
	return cfg
}

func connectAs(t *testing.T, srv *httptest.Server, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}
	cs, err := newClient().Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func probePlan(tool, label string) map[string]any {
	return map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": tool, "arguments": map[string]any{"label": label}}}}}
}

// TestIdentityInEnvelopeAndRecord: a named token's name is the user id of
// the envelope and the record, a caller's request and context ids from
// _meta are echoed, the tenant is recorded, and the token's value appears
// nowhere.
func TestIdentityInEnvelopeAndRecord(t *testing.T) {
	pa := &probe{}
	app := newApp(t, tenantConfig(t), pa.tool(t, "a_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, "alice-secret-token")

	meta := mcp.Meta{"io.github.orchestra-mcp/request_id": "caller-req-42", "io.github.orchestra-mcp/context_id": "conv-7"}
	res, env := servertest.Call(t, alice, probePlan("a_probe", "x"), meta)
	if !env.Artifact.Success {
		t.Fatalf("run failed: %+v", env.Artifact)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var got struct {
		Meta struct {
			UserID    string `json:"user_id"`
			RequestID string `json:"request_id"`
			ContextID string `json:"context_id"`
		} `json:"_metadata"`
	}
	json.Unmarshal(data, &got)
	if got.Meta.UserID != "alice" || got.Meta.RequestID != "caller-req-42" || got.Meta.ContextID != "conv-7" {
		t.Errorf("_metadata = %+v; want user alice, request caller-req-42, context conv-7", got.Meta)
	}
	run, _, err := app.Store().Get(t.Context(), env.ArtifactID)
	if err != nil {
		t.Fatal(err)
	}
	if run.UserID != "alice" || run.Tenant != "a" || run.RequestID != "caller-req-42" {
		t.Errorf("record: user %q tenant %q request %q; want alice, a, caller-req-42", run.UserID, run.Tenant, run.RequestID)
	}
	if strings.Contains(string(data), "alice-secret-token") || strings.Contains(string(run.Envelope), "alice-secret-token") {
		t.Error("the token's value is in the envelope or the record")
	}
	// A request id that is not a short printable string is replaced.
	_, env = servertest.Call(t, alice, probePlan("a_probe", "y"), mcp.Meta{"io.github.orchestra-mcp/request_id": strings.Repeat("x", 500)})
	if env.Metadata.RequestID == "" || len(env.Metadata.RequestID) > 128 {
		t.Errorf("an oversized request id was kept: %q", env.Metadata.RequestID)
	}
}

// TestTenantIsolation: a caller of tenant a cannot read or list tenant b's
// runs, lists and calls only its tools, and a plan with a tool outside its
// globs is refused at plan time with unknown_tool.
func TestTenantIsolation(t *testing.T) {
	pa, pb := &probe{}, &probe{}
	app := newApp(t, tenantConfig(t), pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice, bob := connectAs(t, srv, "alice-secret-token"), connectAs(t, srv, "bob-secret-token")

	_, envB := servertest.Call(t, bob, probePlan("b_probe", "bob's output"), nil)
	if !envB.Artifact.Success {
		t.Fatalf("bob's run failed: %+v", envB.Artifact)
	}
	_, envA := servertest.Call(t, alice, probePlan("a_probe", "alice's output"), nil)

	read := func(cs *mcp.ClientSession, uri string) (string, error) {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	if text, err := read(alice, server.RecordURI(envB.ArtifactID)); err == nil {
		t.Errorf("alice read bob's run:\n%.300s", text)
	}
	if text, err := read(alice, server.ExecutionsURI); err != nil || strings.Contains(text, envB.ArtifactID) || !strings.Contains(text, envA.ArtifactID) {
		t.Errorf("alice's list (%v) must hold her run and not bob's:\n%.500s", err, text)
	}

	// Plan time: b_probe is not in tenant a's catalog.
	_, env := servertest.Call(t, alice, probePlan("b_probe", "x"), nil)
	if len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != "unknown_tool" {
		t.Errorf("alice's plan with b_probe: %+v; want unknown_tool", env.Artifact.ValidationErrors)
	}
	if pb.calls.Load() != 1 {
		t.Errorf("b_probe ran %d times, want 1 (bob's run only)", pb.calls.Load())
	}
	// tools/list and direct calls.
	lr, err := alice.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lr.Tools {
		names = append(names, tool.Name)
	}
	if slices.Contains(names, "b_probe") || !slices.Contains(names, "a_probe") || !slices.Contains(names, "agent_orchestrate") {
		t.Errorf("alice's tools/list = %v", names)
	}
	if _, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "b_probe", Arguments: map[string]any{"label": "x"}}); err == nil {
		t.Error("alice called b_probe directly")
	}
	if pb.calls.Load() != 1 {
		t.Errorf("b_probe ran %d times, want 1", pb.calls.Load())
	}

	// planning_enabled: false refuses bob's prompts.
	_, env = servertest.Call(t, bob, map[string]any{"prompt": "do something"}, nil)
	if len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != "planning_disabled" {
		t.Errorf("bob's prompt: %+v; want planning_disabled", env.Artifact)
	}

	// The records hold the tenants; the store scopes by them.
	runs, _, err := app.Store().List(t.Context(), store.ListOptions{Scope: store.TenantScope("b")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Tenant != "b" || r.UserID != "bob" {
			t.Errorf("tenant b lists %+v", r)
		}
	}
	if len(runs) != 2 {
		t.Errorf("tenant b has %d runs, want 2", len(runs))
	}
}

// TestOperatorTokenSeesEveryTool: a named token in no tenant keeps the
// global catalog.
func TestOperatorTokenSeesEveryTool(t *testing.T) {
	pa, pb := &probe{}, &probe{}
	app := newApp(t, tenantConfig(t), pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	ops := connectAs(t, srv, "ops-secret-token")
	for _, tool := range []string{"a_probe", "b_probe"} {
		if _, env := servertest.Call(t, ops, probePlan(tool, "x"), nil); !env.Artifact.Success {
			t.Errorf("ops calling %s: %+v", tool, env.Artifact)
		}
	}
}

// TestTenantConcurrentPlans: a tenant's max_concurrent_plans refuses its
// next plan with busy while the others' still run.
func TestTenantConcurrentPlans(t *testing.T) {
	pa := &probe{block: make(chan struct{}), started: make(chan struct{}, 1)}
	pb := &probe{}
	cfg := tenantConfig(t)
	a := cfg.Tenants["a"]
	a.Limits.MaxConcurrentPlans = 1
	cfg.Tenants["a"] = a
	cfg.Limits.QueueTimeout = time.Millisecond // busy after a moment's wait
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice, bob := connectAs(t, srv, "alice-secret-token"), connectAs(t, srv, "bob-secret-token")

	first := make(chan *servertest.Envelope, 1)
	go func() {
		res, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: probePlan("a_probe", "first")})
		if err != nil {
			first <- nil
			return
		}
		var env servertest.Envelope
		data, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(data, &env)
		first <- &env
	}()
	<-pa.started
	_, env := servertest.Call(t, alice, probePlan("a_probe", "second"), nil)
	if len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != "busy" {
		t.Errorf("alice's second plan: %+v; want busy", env.Artifact)
	}
	if _, env := servertest.Call(t, bob, probePlan("b_probe", "x"), nil); !env.Artifact.Success {
		t.Errorf("bob's plan while alice's runs: %+v", env.Artifact)
	}
	close(pa.block)
	if env := <-first; env == nil || !env.Artifact.Success {
		t.Errorf("alice's first plan: %+v", env)
	}
}

// TestTenantLimits: a tenant's lower max_steps refuses its longer plan at
// plan time, while another tenant keeps the global limit.
func TestTenantLimits(t *testing.T) {
	pa, pb := &probe{}, &probe{}
	cfg := tenantConfig(t)
	a := cfg.Tenants["a"]
	a.Limits.MaxSteps = 1
	cfg.Tenants["a"] = a
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	two := func(tool string) map[string]any {
		step := map[string]any{"tool": tool, "arguments": map[string]any{"label": "x"}}
		return map[string]any{"plan": map[string]any{"steps": []any{step, step}}}
	}
	_, env := servertest.Call(t, connectAs(t, srv, "alice-secret-token"), two("a_probe"), nil)
	if len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != "too_many_steps" || pa.calls.Load() != 0 {
		t.Errorf("tenant a's two-step plan: %+v, %d calls; want too_many_steps before any call", env.Artifact.ValidationErrors, pa.calls.Load())
	}
	if _, env := servertest.Call(t, connectAs(t, srv, "bob-secret-token"), two("b_probe"), nil); !env.Artifact.Success {
		t.Errorf("tenant b's two-step plan: %+v", env.Artifact)
	}
}
