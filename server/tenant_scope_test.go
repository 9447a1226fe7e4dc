package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
)

// foreignNames returns the names of the catalog's tools outside globs that
// text mentions as words.
func foreignNames(app *server.App, globs []string, text string) []string {
	var out []string
	for _, name := range app.Catalog.Names() {
		own := false
		for _, g := range globs {
			if ok, _ := path.Match(g, name); ok {
				own = true
			}
		}
		if !own && regexp.MustCompile(`\b`+regexp.QuoteMeta(name)+`\b`).MatchString(text) {
			out = append(out, name)
		}
	}
	return out
}

// TestTenantSeesOnlyItsTools: over HTTP with two tenants, nothing a
// tenant's caller is shown names a tool outside its globs: not tools/list
// (agent_orchestrate's description and its example included), not
// orchestra_tools, not the resources, not the answer to a call of an
// unknown tool. The operator, in no tenant, still sees every tool.
func TestTenantSeesOnlyItsTools(t *testing.T) {
	pa, pb := &probe{}, &probe{}
	cfg := tenantConfig(t)
	no := false
	cfg.Server.ExposeDownstream = &no // every tool unlisted: agent_orchestrate's description names them
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, "alice-secret-token")
	globs := cfg.Tenants["a"].Tools

	check := func(what string, v any) string {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if names := foreignNames(app, globs, string(data)); len(names) > 0 {
			t.Errorf("%s shows tenant a's caller the tools %v:\n%s", what, names, data)
		}
		return string(data)
	}
	lr, err := alice.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if lr.CacheScope != "private" {
		t.Errorf("alice's tools/list has cacheScope %q; want private: it is hers alone", lr.CacheScope)
	}
	if text := check("tools/list", lr); !strings.Contains(text, "a_probe: Echoes its label.") || !strings.Contains(text, server.DiscoveryToolName) {
		t.Errorf("alice's tools/list does not describe her tool a_probe, or lacks %s:\n%s", server.DiscoveryToolName, text)
	}
	res, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: server.DiscoveryToolName, Arguments: map[string]any{"query": "echoes label probe test tool"}})
	if err != nil || res.IsError {
		t.Fatalf("orchestra_tools: %v %+v", err, res)
	}
	if text := check("orchestra_tools", res); !strings.Contains(text, "a_probe") {
		t.Errorf("orchestra_tools does not describe a_probe: %s", text)
	}
	res, err = alice.CallTool(t.Context(), &mcp.CallToolParams{Name: server.DiscoveryToolName, Arguments: map[string]any{"names": []string{"nope"}}})
	if err != nil || !res.IsError {
		t.Fatalf("orchestra_tools of an unknown name: %v %+v", err, res)
	}
	check("orchestra_tools' error", res)
	if _, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "b_prob", Arguments: map[string]any{}}); err == nil {
		t.Error("alice called b_prob")
	} else {
		check("the error of an unknown tool", err.Error())
	}
	rl, err := alice.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	check("resources/list", rl)
	rt, err := alice.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	check("resources/templates/list", rt)

	// Tenant b sees its own; the operator every tool.
	lr, err = connectAs(t, srv, "bob-secret-token").ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(lr); !strings.Contains(string(data), "b_probe") || strings.Contains(string(data), "a_probe") {
		t.Errorf("bob's tools/list:\n%s", data)
	}
	ops := connectAs(t, srv, "ops-secret-token")
	if lr, err := ops.ListTools(t.Context(), nil); err != nil || lr.CacheScope != "private" {
		t.Errorf("the operator's tools/list: %v, cacheScope %q; want private, for it differs from the tenants'", err, lr.CacheScope)
	}
	res, err = ops.CallTool(t.Context(), &mcp.CallToolParams{Name: server.DiscoveryToolName, Arguments: map[string]any{"names": []string{"a_probe", "b_probe"}}})
	if err != nil || res.IsError {
		t.Fatalf("the operator's orchestra_tools: %v %+v", err, res)
	}
	if data, _ := json.Marshal(res); !strings.Contains(string(data), `\"a_probe\"`) || !strings.Contains(string(data), `\"b_probe\"`) {
		t.Errorf("the operator is not told of every tool:\n%s", data)
	}
}

// TestTenantRateLimitHTTP: tenants.a.rate_limit holds back all of tenant
// a's callers together over HTTP, with 429 and Retry-After naming the
// tenant, while tenant b's caller goes on. (The rate is so low that no
// request is refilled while the test runs; TestTenantRateLimit checks
// refilling with an injected clock.)
func TestTenantRateLimitHTTP(t *testing.T) {
	cfg := tenantConfig(t)
	t.Setenv("CAROL_TOKEN", "carol-secret-token")
	cfg.Server.Auth.Tokens = append(cfg.Server.Auth.Tokens, config.NamedToken{Name: "carol", TokenEnv: "CAROL_TOKEN"})
	a := cfg.Tenants["a"]
	a.Match.Tokens = append(a.Match.Tokens, "carol")
	a.RateLimit = &config.RateLimit{RequestsPerSecond: 0.001, Burst: 2}
	cfg.Tenants["a"] = a
	srv := httptest.NewServer(newApp(t, cfg).HTTPHandler(server.HTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	as := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	for _, tok := range []string{"alice-secret-token", "carol-secret-token"} {
		if resp, body := post(t, srv.URL+"/mcp", ping, as(tok)); resp.StatusCode != http.StatusOK {
			t.Fatalf("within the tenant's burst: %d %s", resp.StatusCode, body)
		}
	}
	for _, tok := range []string{"alice-secret-token", "carol-secret-token"} {
		resp, body := post(t, srv.URL+"/mcp", ping, as(tok))
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `tenant "a"`) || !strings.Contains(body, "tenants.a.rate_limit") {
			t.Errorf("beyond the tenant's burst: %d %s; want 429 naming tenant a", resp.StatusCode, body)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 900 {
			t.Errorf("Retry-After = %q, want about 1000 s", resp.Header.Get("Retry-After"))
		}
	}
	if resp, body := post(t, srv.URL+"/mcp", ping, as("bob-secret-token")); resp.StatusCode != http.StatusOK {
		t.Errorf("tenant b was held back by tenant a: %d %s", resp.StatusCode, body)
	}
}
