package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

// TestConfiguredFallbackFromTheConfigFile: planner.fallback: reactive in the
// configuration file turns a prompt the model cannot make a valid plan for
// into a reactive run, without the request asking for it; the envelope
// records the path that ran.
func TestConfiguredFallbackFromTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	line := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	bad := `{"type":"tool_calls","reasoning":"x","calls":[{"tool_name":"no_such_tool","arguments":{}}]}`
	script := strings.Join([]string{
		line(map[string]any{"tool_calls": []any{map[string]any{"name": "__planning__", "arguments": json.RawMessage(bad)}}}),
		line(map[string]any{"tool_calls": []any{map[string]any{"name": "__planning__", "arguments": json.RawMessage(bad)}}}),
		line(map[string]any{"tool_calls": []any{map[string]any{"name": "render", "arguments": map[string]any{"template": "hello {{.who}}", "values": map[string]any{"who": "world"}}}}}),
		line(map[string]any{"text": "It says hello world."}),
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "script.jsonl"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("planner:\n  provider: scripted\n  script: "+filepath.Join(dir, "script.jsonl")+"\n  fallback: reactive\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	app := newApp(t, cfg)
	p, err := app.Planner()
	if err != nil {
		t.Fatal(err)
	}
	env, err := p.Ask(t.Context(), &orchestrate.Request{Prompt: "say hello to the world"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if !a.Success || a.Planner.Fallback != planner.FallbackReactive || a.Response != "It says hello world." || len(a.Steps) != 1 {
		t.Errorf("status %s, planner %+v, response %q, %d steps, errors %v", a.Status, a.Planner, a.Response, len(a.Steps), a.Errors)
	}
	if _, err := config.Parse([]byte("planner:\n  provider: scripted\n  script: x\n  fallback: reactiv\n"), os.LookupEnv); err == nil || !strings.Contains(err.Error(), "planner.fallback") {
		t.Errorf("a misspelled fallback: %v", err)
	}
}
