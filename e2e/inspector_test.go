package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInspectorStrict lists orchestra's tools with the MCP Inspector's CLI
// in --strict mode, which fails on a tool schema that MCP clients may
// refuse (a bare true or false where a schema object belongs, among
// others), against `orchestra serve` over stdio with every built-in tool.
// The Inspector comes from testdata/inspector (npm ci there); without it
// the test skips, or fails when ORCHESTRA_REQUIRE_NPM is set, as in CI.
func TestInspectorStrict(t *testing.T) {
	launcher, err := filepath.Abs(filepath.Join("testdata", "inspector", "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(launcher); err != nil || nodeErr != nil {
		msg := "the MCP Inspector is not installed: run `npm ci` in testdata/inspector (and install node)"
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte("builtins:\n  http_request:\n    allowed_hosts: [api.example.com]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, launcher, "--cli", "--method", "tools/list", "--strict",
		"-e", "ORCHESTRA_CONFIG="+cfg, "--", orchestraBin, "serve", "--store", "memory")
	cmd.Env = append(os.Environ(), "HOME="+dir) // the Inspector keeps its files under HOME
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Inspector refused the tool list (%v):\n%s", err, findings(stderr.String()))
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatalf("the Inspector printed no tool list: %v\n%s", err, stdout.String())
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"agent_orchestrate", "http_request", "json_query", "orchestra_tools", "render"}; !slices.Equal(names, want) {
		t.Errorf("the Inspector listed %v, want %v", names, want)
	}
	if !strings.Contains(stderr.String(), "0 errors") {
		t.Errorf("the Inspector's summary does not say 0 errors:\n%s", findings(stderr.String()))
	}
}

// findings drops the server's own log lines from the Inspector's stderr.
func findings(stderr string) string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "time=") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
