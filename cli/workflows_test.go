package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIWorkflows: a run recorded by orchestra run is saved as a workflow
// with its bindings and literal arguments as parameters (flags after the
// exec id), listed, shown, exported as YAML, deleted and imported again
// from the export; a run that failed is not saved.
func TestCLIWorkflows(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(`{"bindings": {"who": "ana"}, "plan": {"steps": [
		{"id": "r", "tool": "render", "arguments": {"template": "hi {{.who}}", "values": {"who": "$bindings.who"}}}],
		"return": {"text": "$r.output.text"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, t.Context(), "", "run", "--store", db, planFile)
	if res.code != 0 {
		t.Fatalf("run: %d %s", res.code, res.stderr)
	}
	var env struct {
		Meta struct {
			ExecID string `json:"exec_id"`
		} `json:"_metadata"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &env); err != nil || env.Meta.ExecID == "" {
		t.Fatalf("run's envelope: %v %s", err, res.stdout)
	}
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "save", env.Meta.ExecID, "--name", "hello", "--description", "Says hi.")
	if res.code != 0 || !strings.Contains(res.stderr, "as workflow hello version 1 (tool workflow__hello) with 2 parameter(s)") {
		t.Fatalf("save: %d %s", res.code, res.stderr)
	}
	// Saved again: version 2, which export writes and import keeps.
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "save", env.Meta.ExecID, "--name", "hello", "--description", "Says hi.")
	if res.code != 0 || !strings.Contains(res.stderr, "as workflow hello version 2") {
		t.Fatalf("second save: %d %s", res.code, res.stderr)
	}
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "list", "--json")
	var rows []struct {
		Name       string   `json:"name"`
		Version    int      `json:"version"`
		Source     string   `json:"source"`
		Parameters []string `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rows); err != nil || len(rows) != 1 || rows[0].Name != "hello" || rows[0].Source != "store" ||
		strings.Join(rows[0].Parameters, ",") != "template,who" {
		t.Fatalf("list: %v %s", err, res.stdout)
	}
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "show", "hello")
	if res.code != 0 || !strings.Contains(res.stdout, "workflows:") || !strings.Contains(res.stdout, "$bindings.template") || !strings.Contains(res.stderr, "from run "+env.Meta.ExecID) {
		t.Fatalf("show: %d %s %s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "export")
	export := filepath.Join(dir, "workflows.yaml")
	if err := os.WriteFile(export, []byte(res.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.stdout, "version: 2") {
		t.Fatalf("export does not write the version:\n%s", res.stdout)
	}
	// Another owner's name is not this one's: delete sees only the owner's.
	if res = runCLI(t, t.Context(), "", "workflows", "--store", db, "delete", "hello", "--owner", "static:bob"); res.code == 0 {
		t.Fatal("deleting the machine's workflow as static:bob succeeded")
	}
	if res = runCLI(t, t.Context(), "", "workflows", "--store", db, "delete", "hello"); res.code != 0 {
		t.Fatalf("delete: %d %s", res.code, res.stderr)
	}
	if res = runCLI(t, t.Context(), "", "workflows", "--store", db, "show", "hello"); res.code == 0 {
		t.Fatal("show after delete succeeded")
	}
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "import", export)
	if res.code != 0 || !strings.Contains(res.stderr, "imported workflow hello as version 2") {
		t.Fatalf("import: %d %s", res.code, res.stderr)
	}
	// Importing it again would put a second version 2 beside the first:
	// refused, saying how to import it as the next version instead.
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "import", export)
	if res.code == 0 || !strings.Contains(res.stderr, "newest stored is 2") || !strings.Contains(res.stderr, "leave out hello's version:") {
		t.Fatalf("importing version 2 again: %d %s", res.code, res.stderr)
	}
	// The imported workflow runs as a plan step.
	callFile := filepath.Join(dir, "call.json")
	os.WriteFile(callFile, []byte(`{"plan": {"steps": [{"id": "w", "tool": "workflow__hello", "arguments": {"who": "bo"}}], "return": "$w.output.text"}}`), 0o644)
	res = runCLI(t, t.Context(), "", "run", "--store", db, callFile)
	if res.code != 0 || !strings.Contains(res.stdout, `"result": "hi bo"`) {
		t.Fatalf("calling the imported workflow: %d %s %s", res.code, res.stdout, res.stderr)
	}
	// A run that failed is not kept.
	os.WriteFile(planFile, []byte(`{"plan": {"steps": [{"id": "q", "tool": "json_query", "arguments": {"query": "error(\"no\")", "input": {}}}]}}`), 0o644)
	res = runCLI(t, t.Context(), "", "run", "--store", db, planFile)
	json.Unmarshal([]byte(res.stdout), &env)
	res = runCLI(t, t.Context(), "", "workflows", "--store", db, "save", env.Meta.ExecID, "--name", "broken")
	if res.code == 0 || !strings.Contains(res.stderr, "only a run that succeeded") {
		t.Errorf("saving a failed run: %d %s", res.code, res.stderr)
	}
	if res = runCLI(t, t.Context(), "", "workflows", "--store", db, "frobnicate"); res.code != 2 {
		t.Errorf("an unknown action: exit %d", res.code)
	}
}
