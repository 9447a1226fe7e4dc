package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/cli"
)

// TestFallbackHandoffAcrossProcesses: `orchestra ask` falls back to the
// reactive loop, whose model asks for render (marked client-final by
// client_final_tools) beside json_query: the run pauses with render's
// call. `orchestra resume ID --results FILE`, another app on the same
// SQLite store with a fresh copy of the scripted model, goes on with the
// loop: the model's next turn (the script's entry "after" that call)
// answers, and json_query does not run again. A resume by an app with no
// planner is refused first, and the run stays paused.
func TestFallbackHandoffAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	script := strings.Join([]string{
		`{"text": "no plan"}`,
		`{"text": "still no plan"}`,
		`{"tool_calls": [{"id": "q1", "name": "json_query", "arguments": {"query": ".a", "input": {"a": "alpha"}}}, {"id": "e1", "name": "render", "arguments": {"template": "hi"}}]}`,
		`{"after": "e1", "text": "the client rendered it"}`,
	}, "\n") + "\n"
	cfg := "planner:\n  provider: scripted\n  script: " + filepath.Join(dir, "script.jsonl") + "\n  fallback: reactive\nclient_final_tools: [render]\n"
	for name, body := range map[string]string{"script.jsonl": script, "orchestra.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "o.db")
	var out, errOut bytes.Buffer
	// ask exits non-zero for a run without its answer; the envelope says why.
	cli.Run(context.Background(), []string{"ask", "--config", filepath.Join(dir, "orchestra.yaml"), "--store", db, "--json", "say hi"}, strings.NewReader(""), &out, &errOut)
	type envelope struct {
		Artifact struct {
			Status   string `json:"status"`
			Response string `json:"response"`
			Pending  []struct {
				CallID string `json:"call_id"`
				Step   string `json:"step"`
				Tool   string `json:"tool"`
			} `json:"pending"`
			Resume struct {
				ExecID string `json:"exec_id"`
			} `json:"resume"`
			Steps []struct {
				Tool   string `json:"tool"`
				Status string `json:"status"`
			} `json:"steps"`
		} `json:"artifact"`
	}
	var env envelope
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "awaiting_client" || len(env.Artifact.Pending) != 1 ||
		env.Artifact.Pending[0].Tool != "render" || env.Artifact.Pending[0].Step != "fallback" || len(env.Artifact.Steps) != 1 || env.Artifact.Steps[0].Tool != "json_query" {
		t.Fatalf("orchestra ask: %s (%v)", out.String(), err)
	}
	results := filepath.Join(dir, "results.json")
	if err := os.WriteFile(results, []byte(`{"`+env.Artifact.Pending[0].CallID+`": {"text": "hi"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without a planner to go on with the loop, the resume is refused and
	// the run stays paused.
	bare := filepath.Join(dir, "bare.yaml")
	if err := os.WriteFile(bare, []byte("client_final_tools: [render]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := cli.Run(context.Background(), []string{"resume", "--config", bare, "--store", db, "--results", results, env.Artifact.Resume.ExecID}, strings.NewReader(""), &out, &errOut); code == cli.ExitOK || !strings.Contains(out.String(), "not_resumable") {
		t.Errorf("a resume without a planner exited %d: %s", code, out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := cli.Run(context.Background(), []string{"resume", "--config", filepath.Join(dir, "orchestra.yaml"), "--store", db, "--results", results, env.Artifact.Resume.ExecID}, strings.NewReader(""), &out, &errOut); code != cli.ExitOK {
		t.Fatalf("orchestra resume exited %d: %s\n%s", code, errOut.String(), out.String())
	}
	env = envelope{}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "success" || env.Artifact.Response != "the client rendered it" {
		t.Fatalf("orchestra resume: %s (%v)", out.String(), err)
	}
	for _, s := range env.Artifact.Steps {
		if s.Tool == "json_query" {
			t.Errorf("json_query ran again after the resume: %s", out.String())
		}
	}
}
