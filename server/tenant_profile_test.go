package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// planAgentStep is the __planning__ answer of a plan with one step that
// asks the agent helper.
const planAgentStep = `{"type":"tool_calls","reasoning":"delegate","calls":[{"tool_name":"agent__helper","arguments":{"user_query":"do the task"}}]}`

// isPlanning reports whether r is a planning request (it offers
// __planning__), not an agent's.
func isPlanning(r *fakeopenai.Request) bool {
	for _, n := range r.ToolNames() {
		if n == "__planning__" {
			return true
		}
	}
	return false
}

// profileConfig is tenantConfig with both tenants planning, an agent
// helper, and the planner on fake.
func profileConfig(t *testing.T, fake *fakeopenai.Server) *config.Config {
	cfg := tenantConfig(t)
	for _, name := range []string{"a", "b"} {
		tn := cfg.Tenants[name]
		tn.PlanningEnabled, tn.Tools = nil, []string{name + "_*", "agent__*"}
		cfg.Tenants[name] = tn
	}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "planner-model", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Helps.", Instructions: "You are helper."}}
	return cfg
}

// inOrder reports whether each of parts is in s, each after the one
// before.
func inOrder(s string, parts ...string) bool {
	at := 0
	for _, p := range parts {
		i := strings.Index(s[at:], p)
		if i < 0 {
			return false
		}
		at += i + len(p)
	}
	return true
}

// TestTenantInstructions: the operator's instructions, then the caller's
// tenant's, then the request's own reach the planning request and the
// agent's, in that order; another tenant's never do.
func TestTenantInstructions(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if isPlanning(r) {
			return fakeopenai.Call("__planning__", planAgentStep)
		}
		return fakeopenai.Text("done")
	})
	cfg := profileConfig(t, fake)
	cfg.Planner.Instructions = "OPERATOR-RULE: be brief."
	ta, tb := cfg.Tenants["a"], cfg.Tenants["b"]
	ta.Instructions, tb.Instructions = "TENANT-A-RULE: write for lawyers.", "TENANT-B-RULE: write for children."
	cfg.Tenants["a"], cfg.Tenants["b"] = ta, tb
	app := newApp(t, cfg)
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	for _, c := range []struct {
		token, own, other, caller string
	}{
		{"alice-secret-token", "TENANT-A-RULE", "TENANT-B-RULE", "CALLER-ALICE"},
		{"bob-secret-token", "TENANT-B-RULE", "TENANT-A-RULE", "CALLER-BOB"},
	} {
		before := len(fake.Requests())
		a, res := artifact(t, connectAs(t, srv, c.token), map[string]any{"prompt": "do it", "context": map[string]any{"instructions": c.caller}})
		if res.IsError {
			t.Fatalf("%s: %v %v", c.token, a["errors"], a["validation_errors"])
		}
		reqs := fake.Requests()[before:]
		var planning, agent int
		for _, r := range reqs {
			user := r.User()
			if isPlanning(r) {
				planning++
			} else {
				agent++
			}
			if !inOrder(user, "OPERATOR-RULE", c.own, c.caller) {
				t.Errorf("%s: a request (planning %v) does not hold the operator's, the tenant's and the caller's instructions in order:\n%s", c.token, isPlanning(r), user)
			}
			if strings.Contains(user+r.System(), c.other) {
				t.Errorf("%s: a request holds the other tenant's instructions %s:\n%s", c.token, c.other, user)
			}
		}
		if planning != 1 || agent != 1 {
			t.Errorf("%s: %d planning and %d agent requests, want 1 and 1", c.token, planning, agent)
		}
	}
}

// TestTenantMaxToolSteps: a tenant's limits.max_tool_steps lowers its
// agents' own; a caller in no tenant keeps the agent's.
func TestTenantMaxToolSteps(t *testing.T) {
	var mu sync.Mutex
	turns := 0
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		mu.Lock()
		turns++
		mu.Unlock()
		return fakeopenai.Call("a_probe", `{"label": "again"}`) // never done
	})
	cfg := profileConfig(t, fake)
	ta := cfg.Tenants["a"]
	ta.Limits.MaxToolSteps = 2
	cfg.Tenants["a"] = ta
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Helps.", Tools: []string{"a_probe"}, MaxToolSteps: 5}}
	pa := &probe{}
	app := newApp(t, cfg, pa.tool(t, "a_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	for _, c := range []struct {
		token string
		want  int
	}{{"alice-secret-token", 2 + 1}, {"ops-secret-token", 5 + 1}} { // the turns that may call tools, and one that asks for the answer
		mu.Lock()
		turns = 0
		mu.Unlock()
		_, env := runPlan(t, connectAs(t, srv, c.token), plan(map[string]any{"id": "h", "agent": "helper", "prompt": "probe"}))
		if env.Artifact.Status == orchestrate.StatusSuccess {
			t.Fatalf("%s: the agent that never answers succeeded", c.token)
		}
		mu.Lock()
		got := turns
		mu.Unlock()
		if got != c.want {
			t.Errorf("%s: the agent's model was asked %d times, want %d (max_tool_steps + 1)", c.token, got, c.want)
		}
		if e := env.Artifact.Errors; len(e) == 0 || !strings.Contains(e[0].Message+string(e[0].Code), "max_tool_steps") {
			t.Errorf("%s: errors %v, want one about max_tool_steps", c.token, e)
		}
	}
}

// TestTenantOwnServer: a tenant's own MCP server (the real
// server-everything) starts when one of its callers first needs it, and
// only its callers see it: in tools/list, in agent_orchestrate's
// description, in orchestra_tools, in the suggestions of an unknown tool,
// and in what plans may call. Callers of another tenant and of none get
// nothing of it.
func TestTenantOwnServer(t *testing.T) {
	cfg := tenantConfig(t)
	no := false
	ev := npmServer(t, "server-everything")
	ev.Expose = &no // described, not listed: descriptions and orchestra_tools name it
	ta, tb := cfg.Tenants["a"], cfg.Tenants["b"]
	ta.MCPServers = map[string]mcpserver.ServerConfig{"ev": ev}
	tb.Tools = nil // every tool: still never tenant a's own
	cfg.Tenants["a"], cfg.Tenants["b"] = ta, tb
	app := newApp(t, cfg, (&probe{}).tool(t, "a_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	if _, ok := app.Catalog.Lookup("ev__echo"); ok {
		t.Fatal("tenant a's server started before any of its callers needed it")
	}
	ops := connectAs(t, srv, "ops-secret-token")
	bob := connectAs(t, srv, "bob-secret-token")
	if _, ok := app.Catalog.Lookup("ev__echo"); ok {
		t.Fatal("another caller's session started tenant a's server")
	}
	alice := connectAs(t, srv, "alice-secret-token")
	listA := listing(t, alice)
	if _, ok := app.Catalog.Lookup("ev__echo"); !ok {
		t.Fatalf("tenant a's caller listed tools and its server's tools are not in the catalog: %+v", app.TenantDownstream("a"))
	}
	if !strings.Contains(listA, "ev__echo") {
		t.Errorf("alice's agent_orchestrate does not describe her tenant's ev__echo:\n%s", listA)
	}
	echo := plan(map[string]any{"id": "e", "tool": "ev__echo", "arguments": map[string]any{"message": "hi"}})
	if _, env := runPlan(t, alice, echo); env.Artifact.Status != orchestrate.StatusSuccess {
		t.Errorf("alice's plan calling her tenant's ev__echo: %s %v %v", env.Artifact.Status, env.Artifact.Errors, env.Artifact.ValidationErrors)
	}
	found := discover(t, alice, "echo")
	if !strings.Contains(found, "ev__echo") {
		t.Errorf("orchestra_tools for alice does not find ev__echo: %s", found)
	}

	for name, cs := range map[string]*mcp.ClientSession{"bob": bob, "ops": ops} {
		if l := listing(t, cs); strings.Contains(l, "ev__") {
			t.Errorf("%s's tools/list names tenant a's server:\n%s", name, l)
		}
		if d := discover(t, cs, "echo"); strings.Contains(d, "ev__") {
			t.Errorf("%s's orchestra_tools names tenant a's server: %s", name, d)
		}
		_, env := runPlan(t, cs, echo)
		if env.Artifact.Status == orchestrate.StatusSuccess {
			t.Errorf("%s's plan called tenant a's ev__echo", name)
		}
		if data, _ := json.Marshal(env.Artifact); strings.Contains(string(data), "Echoes back") {
			t.Errorf("%s's refused plan describes tenant a's tool: %s", name, data)
		}
		for _, tool := range []string{"ev__echo", "ev__echoo"} {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": "hi"}})
			if err == nil {
				t.Errorf("%s called %s directly", name, tool)
			} else if strings.Contains(strings.ReplaceAll(err.Error(), `"`+tool+`"`, ""), "ev__") {
				t.Errorf("%s: the error of calling %s suggests tenant a's tools: %v", name, tool, err)
			}
		}
	}
}

// listing returns a caller's tools/list as JSON: names and descriptions.
func listing(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.Tools)
	return string(data)
}

// discover returns what orchestra_tools tells a caller for query, or ""
// when it is not listed to it.
func discover(t *testing.T, cs *mcp.ClientSession, query string) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: server.DiscoveryToolName, Arguments: map[string]any{"query": query}})
	if err != nil {
		return ""
	}
	data, _ := json.Marshal(res)
	return string(data)
}
