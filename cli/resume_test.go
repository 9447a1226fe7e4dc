package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIPauseAndResume: orchestra run pauses at a client tool (exit 0,
// the envelope says what to run), and orchestra resume --results goes on.
func TestCLIPauseAndResume(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "orchestra.db")
	planFile := filepath.Join(dir, "plan.json")
	results := filepath.Join(dir, "results.json")
	os.WriteFile(planFile, []byte(`{"client_tools": [{"name": "approve"}], "plan": {"steps": [
		{"id": "ok", "tool": "approve", "arguments": {"what": "deploy"}},
		{"id": "say", "tool": "render", "arguments": {"template": "approved by {{.who}}", "values": {"who": "$ok.output.by"}}}]}}`), 0o600)
	os.WriteFile(results, []byte(`{"ok": {"by": "ada"}}`), 0o600)
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"run", "--store", db, planFile}, strings.NewReader(""), &out, &errOut); code != ExitOK {
		t.Fatalf("orchestra run exited %d: %s", code, errOut.String())
	}
	var env struct {
		Artifact struct {
			Status string `json:"status"`
			Resume struct {
				ExecID string `json:"exec_id"`
			} `json:"resume"`
			Steps []struct {
				Output map[string]any `json:"output"`
			} `json:"steps"`
		} `json:"artifact"`
	}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "awaiting_client" || !strings.Contains(errOut.String(), "waits for the client to run ok (approve)") {
		t.Fatalf("orchestra run: %s\n%s", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := Run(context.Background(), []string{"resume", "--store", db, "--results", results, env.Artifact.Resume.ExecID}, strings.NewReader(""), &out, &errOut); code != ExitOK {
		t.Fatalf("orchestra resume exited %d: %s\n%s", code, errOut.String(), out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "success" || env.Artifact.Steps[1].Output["text"] != "approved by ada" {
		t.Fatalf("orchestra resume: %s", out.String())
	}
}
