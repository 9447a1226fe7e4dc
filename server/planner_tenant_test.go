package server_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/server"
)

// writeScript writes a scripted model's one answer: a plan calling tool.
func writeScript(t *testing.T, name, tool, label string) string {
	t.Helper()
	plan := `{"type":"tool_calls","reasoning":"one call","calls":[{"tool_name":"` + tool + `","arguments":{"label":"` + label + `"}}]}`
	answer, _ := json.Marshal(map[string]any{"tool_calls": []any{map[string]any{"name": "__planning__", "arguments": json.RawMessage(plan)}}})
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, append(answer, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTenantPlanner: a tenant's prompt goes to the tenant's own model and
// is planned over its tools; a caller in no tenant gets the global planner.
func TestTenantPlanner(t *testing.T) {
	pa, pb := &probe{}, &probe{}
	cfg := tenantConfig(t)
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderScripted, Script: writeScript(t, "global.jsonl", "b_probe", "global")}}
	a := cfg.Tenants["a"]
	a.Planner = &llm.Config{Provider: llm.ProviderScripted, Script: writeScript(t, "tenant.jsonl", "a_probe", "tenant")}
	cfg.Tenants["a"] = a
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	alice := connectAs(t, srv, "alice-secret-token")
	if a, res := artifact(t, alice, map[string]any{"prompt": "do it"}); res.IsError {
		t.Fatalf("alice's prompt: %v", a["errors"])
	}
	if pa.calls.Load() != 1 || pb.calls.Load() != 0 {
		t.Errorf("after alice's prompt a_probe ran %d, b_probe %d times; want 1, 0 (her tenant's planner)", pa.calls.Load(), pb.calls.Load())
	}
	ops := connectAs(t, srv, "ops-secret-token")
	if a, res := artifact(t, ops, map[string]any{"prompt": "do it"}); res.IsError {
		t.Fatalf("ops's prompt: %v", a["errors"])
	}
	if pb.calls.Load() != 1 {
		t.Errorf("after ops's prompt b_probe ran %d times, want 1 (the global planner)", pb.calls.Load())
	}
}
