// Package mcpb_test checks the MCP Bundle manifest in this directory against
// the server it describes. pack.mjs packs it with a binary; bundle.test.mjs
// starts a packed bundle as a client would.
package mcpb_test

import (
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
)

var update = flag.Bool("update", false, "rewrite the tools of manifest.json from the server")

type manifestTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

type manifest struct {
	Version string `json:"version"`
	Server  struct {
		Type       string `json:"type"`
		EntryPoint string `json:"entry_point"`
		MCPConfig  struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcp_config"`
	} `json:"server"`
	Tools          []manifestTool `json:"tools"`
	ToolsGenerated bool           `json:"tools_generated"`
	UserConfig     map[string]struct {
		Type      string `json:"type"`
		Sensitive bool   `json:"sensitive"`
		Default   any    `json:"default"`
	} `json:"user_config"`
}

func readManifest(t *testing.T) ([]byte, manifest) {
	t.Helper()
	data, err := os.ReadFile("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return data, m
}

// serverTools lists the tools a server with the default configuration
// gives a client: the manifest's static tools.
func serverTools(t *testing.T) []manifestTool {
	t.Helper()
	app, err := server.New(t.Context(), config.Default(), server.Options{Store: "memory", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "manifest-test", Version: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var tools []manifestTool
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		summary, _, _ := strings.Cut(strings.TrimSpace(tool.Description), "\n")
		tools = append(tools, manifestTool{Name: tool.Name, Description: summary})
	}
	return tools
}

var toolsRE = regexp.MustCompile(`(?s)"tools": \[(?:\]|\n.*?\n  \])`)

// TestManifestTools fails when the manifest's tools differ from the tools
// the server lists with the default configuration. Rewrite them with
// go test ./packaging/mcpb -update.
func TestManifestTools(t *testing.T) {
	data, m := readManifest(t)
	want := serverTools(t)
	if *update {
		b, err := json.MarshalIndent(want, "  ", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out := toolsRE.ReplaceAllLiteral(data, append([]byte(`"tools": `), b...))
		if err := os.WriteFile("manifest.json", out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, m.Tools); diff != "" {
		t.Errorf("manifest.json tools are stale (-server +manifest):\n%s\nrun: go test ./packaging/mcpb -update", diff)
	}
	if !m.ToolsGenerated {
		t.Error("tools_generated is false, but the tools of configured MCP servers join the list at run time")
	}
}

// TestManifestServer: the manifest starts the stdio server, hands it the
// configuration file and the planner key, and keeps the key secret.
func TestManifestServer(t *testing.T) {
	_, m := readManifest(t)
	cfg := m.Server.MCPConfig
	if m.Server.Type != "binary" || cfg.Command != "${__dirname}/"+m.Server.EntryPoint {
		t.Errorf("server: type %q, command %q, entry point %q: want the bundled binary", m.Server.Type, cfg.Command, m.Server.EntryPoint)
	}
	if !cmp.Equal(cfg.Args, []string{"serve"}) {
		t.Errorf("args %q, want [serve]: stdio", cfg.Args)
	}
	wantEnv := map[string]string{
		"ORCHESTRA_CONFIG":  "${user_config.config_file}",
		"OPENAI_API_KEY":    "${user_config.planner_api_key}",
		"ANTHROPIC_API_KEY": "${user_config.planner_api_key}",
	}
	if diff := cmp.Diff(wantEnv, cfg.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	for name, c := range m.UserConfig {
		// An optional value without a default stays "${user_config.NAME}"
		// in the command line: give each one.
		if c.Default == nil {
			t.Errorf("user_config.%s has no default", name)
		}
	}
	if k := m.UserConfig["planner_api_key"]; !k.Sensitive || k.Type != "string" {
		t.Errorf("user_config.planner_api_key: type %q, sensitive %v; want a sensitive string", k.Type, k.Sensitive)
	}
	if c := m.UserConfig["config_file"]; c.Type != "file" {
		t.Errorf("user_config.config_file: type %q, want file", c.Type)
	}
}
