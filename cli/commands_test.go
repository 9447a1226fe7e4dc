package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cliResult is what one run of the CLI did.
type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, ctx context.Context, stdin string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return cliResult{code, stdout.String(), stderr.String()}
}

const quickstartReport = "Revenue for the sales team: 236.5\nLargest order: Grace (99)\n- east: 60\n- north: 77.5\n- south: 99\n"

func TestCLI(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	quickstart, err := os.ReadFile("examples/quickstart.json")
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		ctx   context.Context // default t.Context()
		code  int
		// usage marks a usage error: stderr must carry a "hint:" line.
		usage bool
		// The output must match these regular expressions.
		stdout, stderr []string
	}{
		{name: "no arguments", args: nil, code: ExitInvalid, usage: true, stderr: []string{`Usage:`, `orchestra run`}},
		{name: "help", args: []string{"help"}, code: ExitOK, stdout: []string{`orchestra serve`, `orchestra run`, `orchestra validate`, `orchestra tools`, `orchestra version`}},
		{name: "--help", args: []string{"--help"}, code: ExitOK, stdout: []string{`Usage:`}},
		{name: "unknown command", args: []string{"rnu"}, code: ExitInvalid, usage: true, stderr: []string{`unknown command "rnu"`, `did you mean "run"`}},
		{name: "version", args: []string{"version"}, code: ExitOK, stdout: []string{`^orchestra \S+\n$`}},
		{name: "--version", args: []string{"--version"}, code: ExitOK, stdout: []string{`^orchestra \S+\n$`}},
		{name: "version with an argument", args: []string{"version", "now"}, code: ExitInvalid, usage: true, stderr: []string{`unexpected argument "now"`}},

		{name: "run quickstart", args: []string{"run", "examples/quickstart.json"}, code: ExitOK, stdout: []string{`"status": "success"`}, stderr: []string{`Plan success: 5 of 5 tool steps succeeded`}},
		{name: "agents", args: []string{"agents", "--config", "examples/agents/config.yaml"}, code: ExitOK, stdout: []string{`(?m)^counter\s+agent__counter\s+scripted:script.jsonl\s+false\s+json_query$`, `(?m)^writer\s+agent__writer\s+\S+\s+true\s+\(none\)$`}},
		{name: "agents as JSON", args: []string{"agents", "--config", "examples/agents/config.yaml", "--json"}, code: ExitOK, stdout: []string{`"tool": "agent__counter"`, `"tools": \[\s*"json_query"\s*\]`, `"actions": \[\s*"headline"`}},
		{name: "agents without any", args: []string{"agents"}, code: ExitOK, stdout: []string{`No agents are configured`}},
		{name: "run agent steps", args: []string{"run", "--config", "examples/agents/config.yaml", "examples/agents/plan.json"}, code: ExitOK, stdout: []string{`"type": "agent"`, `"text": "Fruit season is here: 3 fruits \(apple, pear and plum\)"`}},
		{name: "run quickstart from stdin", args: []string{"run", "-"}, stdin: string(quickstart), code: ExitOK, stdout: []string{`"status": "success"`}},
		{name: "run a bare plan", args: []string{"run", "testdata/cli/bare_plan.json"}, code: ExitOK, stdout: []string{`"text": "hello world"`}},
		{name: "run a failing plan", args: []string{"run", "testdata/cli/failing.json"}, code: ExitFailed, stdout: []string{`"status": "failed"`, `"status": "skipped"`, `"text": "kept"`}, stderr: []string{`1 failed, 1 skipped`, `boom`}},
		{name: "run an invalid plan", args: []string{"run", "testdata/cli/invalid.json"}, code: ExitInvalid, stdout: []string{`"code": "unknown_tool"`, `"code": "unknown_ref"`}, stderr: []string{`invalid`, `json_query`}},
		{name: "run malformed JSON", args: []string{"run", "testdata/cli/malformed.json"}, code: ExitInvalid, stdout: []string{`"code": "invalid_json"`}, stderr: []string{`truncated|invalid JSON`}},
		{name: "run malformed JSON from stdin", args: []string{"run", "-"}, stdin: `{"plan": [}`, code: ExitInvalid, stdout: []string{`"code": "invalid_json"`}},
		{name: "run wrong types", args: []string{"run", "-"}, stdin: `{"plan": {"steps": "all"}, "dry_run": "yes"}`, code: ExitInvalid, stdout: []string{`"path": "plan.steps"`, `"path": "dry_run"`}},
		{name: "run unknown field", args: []string{"run", "-"}, stdin: `{"plan": {"steps": [{"tool": "render", "arguments": {"template": "x"}}]}, "bindigns": {}}`, code: ExitInvalid, stdout: []string{`"code": "unknown_field"`, `bindings`}},
		{name: "run a prompt", args: []string{"run", "-"}, stdin: `{"prompt": "do things"}`, code: ExitInvalid, stdout: []string{`"code": "planner_failed"`}},
		{name: "run without a plan", args: []string{"run"}, code: ExitInvalid, usage: true, stderr: []string{`missing PLAN argument`}},
		{name: "run two plans", args: []string{"run", "a.json", "b.json"}, code: ExitInvalid, usage: true, stderr: []string{`expected one PLAN argument, got 2`}},
		{name: "run a missing file", args: []string{"run", "testdata/cli/nope.json"}, code: ExitInvalid, usage: true, stderr: []string{`nope.json`}},
		{name: "run dry", args: []string{"run", "-"}, stdin: `{"dry_run": true, "plan": {"steps": [{"tool": "render", "arguments": {"template": "x"}}]}}`, code: ExitOK, stdout: []string{`"dry_run": true`}, stderr: []string{`Dry run`}},

		{name: "validate quickstart", args: []string{"validate", "examples/quickstart.json"}, code: ExitOK, stdout: []string{`"valid": true`, `"errors": \[\]`}},
		{name: "validate from stdin", args: []string{"validate", "-"}, stdin: string(quickstart), code: ExitOK, stdout: []string{`"valid": true`}},
		{name: "validate an invalid plan", args: []string{"validate", "testdata/cli/invalid.json"}, code: ExitInvalid, stdout: []string{`"valid": false`, `"code": "unknown_tool"`, `"json_query"`, `"code": "unknown_ref"`}, stderr: []string{`2 problems`}},
		{name: "validate malformed JSON", args: []string{"validate", "testdata/cli/malformed.json"}, code: ExitInvalid, stdout: []string{`"valid": false`, `"code": "invalid_json"`}},
		{name: "validate a prompt", args: []string{"validate", "-"}, stdin: `{"prompt": "x"}`, code: ExitInvalid, stdout: []string{`"valid": false`}},
		{name: "validate without a plan", args: []string{"validate"}, code: ExitInvalid, usage: true, stderr: []string{`missing PLAN argument`}},

		{name: "tools", args: []string{"tools"}, code: ExitOK, stdout: []string{`(?m)^TOOL\s+SOURCE`, `(?m)^json_query\s+builtin\s+yes`, `(?m)^render\s+builtin\s+yes`}},
		{name: "tools --json", args: []string{"tools", "--json"}, code: ExitOK, stdout: []string{`"name": "json_query"`, `"inputSchema"`, `"outputSchema"`}},
		{name: "tools with an argument", args: []string{"tools", "all"}, code: ExitInvalid, usage: true, stderr: []string{`unexpected argument "all"`}},

		{name: "bad flag", args: []string{"run", "--nope", "x.json"}, code: ExitInvalid, usage: true, stderr: []string{`flag provided but not defined: -nope`}},
		{name: "bad flag value", args: []string{"tools", "--json=maybe"}, code: ExitInvalid, usage: true, stderr: []string{`invalid boolean value`}},
		{name: "command help", args: []string{"serve", "-h"}, code: ExitOK, stderr: []string{`-http`, `-stateless`, `-insecure`, `-config`}},
		{name: "bad log level", args: []string{"tools", "--log-level", "loud"}, code: ExitInvalid, usage: true, stderr: []string{`--log-level "loud"`}},

		{name: "bad config: unknown key", args: []string{"tools", "--config", "testdata/cli/unknown_key.yaml"}, code: ExitInvalid, usage: true, stderr: []string{`unknown_key.yaml:3: unknown key "max_paralel" in limits; did you mean "max_parallel"\?`}},
		{name: "bad config: missing env", args: []string{"run", "--config", "testdata/cli/missing_env.yaml", "examples/quickstart.json"}, code: ExitInvalid, usage: true, stderr: []string{`missing_env.yaml:4: environment variable ORCHESTRA_TEST_UNSET_HOST is not set \(used in builtins.http_request.allowed_hosts\[0\]\)`}},
		{name: "bad config: missing file", args: []string{"validate", "--config", "testdata/cli/nope.yaml", "examples/quickstart.json"}, code: ExitInvalid, usage: true, stderr: []string{`nope.yaml`}},

		{name: "serve: public address refused", args: []string{"serve", "--http", "0.0.0.0:0"}, code: ExitInvalid, usage: true, stderr: []string{`refusing to serve on 0.0.0.0:0`, `--insecure`}},
		{name: "serve: bad address", args: []string{"serve", "--http", "localhost"}, code: ExitInvalid, usage: true, stderr: []string{`invalid --http address "localhost"`}},
		{name: "serve: --stateless without --http", args: []string{"serve", "--stateless"}, code: ExitInvalid, usage: true, stderr: []string{`apply only with --http`}},
		{name: "serve: an argument", args: []string{"serve", "now"}, code: ExitInvalid, usage: true, stderr: []string{`unexpected argument "now"`}},
		{name: "serve stdio until stdin ends", args: []string{"serve"}, code: ExitOK},
		{name: "serve HTTP until cancelled", args: []string{"serve", "--http", ":0"}, ctx: cancelled, code: ExitOK, stderr: []string{`serving MCP at http://127\.0\.0\.1:\d+/mcp`}},
		{name: "serve HTTP insecure", args: []string{"serve", "--http", "0.0.0.0:0", "--insecure"}, ctx: cancelled, code: ExitOK, stderr: []string{`serving MCP at http://`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			r := runCLI(t, ctx, tc.stdin, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.usage && !regexp.MustCompile(`(?m)^hint: \S`).MatchString(r.stderr) {
				t.Errorf("a usage error without a hint line:\n%s", r.stderr)
			}
			for _, re := range tc.stdout {
				if !regexp.MustCompile(re).MatchString(r.stdout) {
					t.Errorf("stdout does not match %s:\n%s", re, r.stdout)
				}
			}
			for _, re := range tc.stderr {
				if !regexp.MustCompile(re).MatchString(r.stderr) {
					t.Errorf("stderr does not match %s:\n%s", re, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("the command crashed:\n%s", r.stderr)
			}
		})
	}
}

// TestRunQuickstart runs the README's first command and checks the report
// it computes.
func TestRunQuickstart(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	r := runCLI(t, t.Context(), "", "run", "examples/quickstart.json")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	var env struct {
		Artifact struct {
			Status string `json:"status"`
			Steps  []struct {
				ID       string         `json:"id"`
				Status   string         `json:"status"`
				Output   map[string]any `json:"output"`
				Children []struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				} `json:"children"`
			} `json:"steps"`
		} `json:"artifact"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil {
		t.Fatalf("stdout is not the JSON envelope: %v\n%s", err, r.stdout)
	}
	steps := env.Artifact.Steps
	if len(steps) != 3 || steps[1].ID != "stats" || len(steps[1].Children) != 3 {
		t.Fatalf("steps = %+v; want orders, stats (a group of 3), report", steps)
	}
	if got := steps[2].Output["text"]; got != quickstartReport {
		t.Errorf("the report is\n%q\nwant\n%q", got, quickstartReport)
	}
}

// TestCLIConfig runs commands with configuration files in YAML and JSON.
func TestCLIConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yamlCfg := write("c.yaml", "limits:\n  max_steps: 2\nbuiltins:\n  http_request:\n    allowed_hosts: [\"${ORCHESTRA_TEST_HOST:-api.example.com}\"]\n")
	jsonCfg := write("c.json", `{"limits": {"max_steps": 2}, "builtins": {"http_request": {"allowed_hosts": ["${ORCHESTRA_TEST_HOST}"]}}}`)
	t.Setenv("ORCHESTRA_TEST_HOST", "api.example.org")

	for _, cfg := range []string{yamlCfg, jsonCfg} {
		t.Run(filepath.Ext(cfg), func(t *testing.T) {
			r := runCLI(t, t.Context(), "", "tools", "--config", cfg)
			if r.code != ExitOK || !regexp.MustCompile(`(?m)^http_request\s+builtin`).MatchString(r.stdout) {
				t.Errorf("tools with allowed hosts: code %d, no http_request:\n%s%s", r.code, r.stdout, r.stderr)
			}
			// The quickstart has five tool steps, over the limit of 2.
			r = runCLI(t, t.Context(), "", "validate", "--config", cfg, "examples/quickstart.json")
			if r.code != ExitInvalid || !strings.Contains(r.stdout, `"code": "too_many_steps"`) {
				t.Errorf("validate with max_steps 2: code %d\n%s", r.code, r.stdout)
			}
		})
	}
	t.Run("ORCHESTRA_CONFIG", func(t *testing.T) {
		t.Setenv("ORCHESTRA_CONFIG", yamlCfg)
		r := runCLI(t, t.Context(), "", "validate", "examples/quickstart.json")
		if r.code != ExitInvalid {
			t.Errorf("$ORCHESTRA_CONFIG was not read: code %d", r.code)
		}
	})
	t.Run("request limit", func(t *testing.T) {
		small := write("small.yaml", "server:\n  max_request_bytes: 1024\n")
		r := runCLI(t, t.Context(), `{"plan": {"steps": [{"tool": "render", "arguments": {"template": "`+strings.Repeat("a", 2048)+`"}}]}}`, "run", "--config", small, "-")
		if r.code != ExitInvalid || !strings.Contains(r.stderr, "server.max_request_bytes") {
			t.Errorf("an input over the limit: code %d\n%s", r.code, r.stderr)
		}
	})
}
