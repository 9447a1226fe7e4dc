package server_test

import (
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
)

// TestAgentStartupChecks: an agent whose tools globs can match no tool,
// or whose model cannot be built (an unknown provider), stops start-up
// with the agent's name and the fix; globs that match a built-in tool,
// another agent, a configured server's future tools or client_final_tools
// start, as does an agent with one glob for the client's own tools beside
// others that match.
// TestAgentToolsOfATenantsServer: an agent whose tools are those of a
// tenant's own server starts: that tenant's callers run it with them.
func TestAgentToolsOfATenantsServer(t *testing.T) {
	cfg := tenantConfig(t)
	ta := cfg.Tenants["a"]
	ta.MCPServers = map[string]mcpserver.ServerConfig{"crm": {Command: "unused", Disabled: true}}
	cfg.Tenants["a"] = ta
	cfg.Agents = map[string]agents.Config{"sales": {Description: "Works the CRM.", Tools: []string{"crm__*"}}}
	app, err := server.New(t.Context(), cfg, server.Options{Version: "test"})
	if err != nil {
		t.Fatalf("did not start: %v", err)
	}
	app.Close()
}

func TestAgentStartupChecks(t *testing.T) {
	disabled := map[string]mcpserver.ServerConfig{"fs": {Command: "unused", Disabled: true}}
	for _, tc := range []struct {
		name  string
		agent agents.Config
		want  []string // nil: it starts
	}{
		{"no match", agents.Config{Tools: []string{"nosuch_*", "fz__read"}},
			[]string{"agent a:", `agents.a.tools ("nosuch_*", "fz__read") match no tool`, "fix the globs", "mcpServers"}},
		{"unknown provider", agents.Config{Tools: []string{"json_query"}, Model: &llm.Config{Provider: "gemini", Model: "g"}},
			[]string{"agent a:", "agents.a.model", `"gemini"`, "fix agents.a.model, or remove it"}},
		{"built-in", agents.Config{Tools: []string{"json_*"}}, nil},
		{"a server's tools", agents.Config{Tools: []string{"fs__read_*"}}, nil},
		{"a server's, widely", agents.Config{Tools: []string{"f*"}}, nil},
		{"another agent", agents.Config{Tools: []string{"agent__b"}}, nil},
		{"client final", agents.Config{Tools: []string{"editor_apply"}}, nil},
		{"a client's beside others", agents.Config{Tools: []string{"json_query", "canvas_*"}}, nil},
		{"no tools", agents.Config{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.MCPServers = disabled
			cfg.ClientFinalTools = []string{"editor_*"}
			tc.agent.Description = "Does things."
			cfg.Agents = map[string]agents.Config{"a": tc.agent, "b": {Description: "Other."}}
			app, err := server.New(t.Context(), cfg, server.Options{Version: "test"})
			if err == nil {
				app.Close()
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("did not start: %v", err)
			case tc.want != nil && err == nil:
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q lacks %q", err, w)
				}
			}
		})
	}
}
