package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// memoryServer writes a configuration whose downstream server is the
// reference memory server from npm; without it the test skips, or fails
// when ORCHESTRA_REQUIRE_NPM is set (as in CI).
func memoryServer(t *testing.T) string {
	t.Helper()
	entry, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || nodeErr != nil {
		msg := "the npm test servers are not installed: run `npm ci` in testdata/npm (and install node)"
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "orchestra.yaml")
	yaml := fmt.Sprintf("mcpServers:\n  memory:\n    command: %q\n    args: [%q]\n    env:\n      MEMORY_FILE_PATH: %q\n", node, entry, filepath.Join(dir, "memory.jsonl"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestQuietByDefault: at a command's default level, a new store, an
// in-memory one and a downstream server that connects print nothing;
// `run` says only its summary. At info a command says what its runs did
// but still nothing of starting up; serve logs at info by default.
func TestQuietByDefault(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	cfg := memoryServer(t)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, []byte(`{"plan": {"steps": [{"id": "graph", "tool": "memory__read_graph", "arguments": {}}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	builtinPlan := filepath.Join(dir, "builtin.json")
	if err := os.WriteFile(builtinPlan, []byte(`{"plan": {"steps": [{"tool": "json_query", "arguments": {"query": ".", "input": {}}}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, ctx context.Context, args ...string) string {
		t.Helper()
		var stdout, stderr strings.Builder
		if code := Run(ctx, args, strings.NewReader(""), &stdout, &stderr); code != ExitOK {
			t.Fatalf("orchestra %s exited %d:\n%s", strings.Join(args, " "), code, stderr.String())
		}
		return stderr.String()
	}
	summary := regexp.MustCompile(`^Plan success: 1 of 1 tool steps succeeded in \d+ ms\.\n$`)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"a new store", []string{"run", "--store", filepath.Join(dir, "new.db"), builtinPlan}},
		{"an in-memory store", []string{"run", "--store", "memory", builtinPlan}},
		{"a server that connects", []string{"run", "--config", cfg, "--store", "memory", plan}},
	} {
		if got := run(t, t.Context(), c.args...); !summary.MatchString(got) {
			t.Errorf("%s: stderr is more than the summary:\n%s", c.name, got)
		}
	}
	if got := run(t, t.Context(), "tools", "--config", cfg); got != "" {
		t.Errorf("tools with a server that connects wrote to stderr:\n%s", got)
	}

	got := run(t, t.Context(), "run", "--log-level", "info", "--config", cfg, "--store", filepath.Join(dir, "other.db"), plan)
	if !strings.Contains(got, `level=INFO msg="run finished"`) {
		t.Errorf("--log-level info does not log the run:\n%s", got)
	}
	for _, chatter := range []string{"migration", "connected", "downstream server"} {
		if strings.Contains(got, chatter) {
			t.Errorf("--log-level info logs start-up chatter (%q):\n%s", chatter, got)
		}
	}
	got = run(t, t.Context(), "run", "--log-level", "debug", "--store", filepath.Join(dir, "third.db"), builtinPlan)
	if !strings.Contains(got, `level=DEBUG msg="applied execution store migration"`) {
		t.Errorf("--log-level debug does not log the migrations of a new store:\n%s", got)
	}

	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	if got := run(t, stopped, "serve", "--http", "127.0.0.1:0", "--store", "memory"); !strings.Contains(got, `level=INFO msg="serving Streamable HTTP"`) {
		t.Errorf("serve does not log at info by default:\n%s", got)
	}
}
