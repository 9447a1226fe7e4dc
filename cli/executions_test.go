package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/store"
)

// TestExecutionsByTenant: orchestra executions --tenant lists and reads
// only that tenant's runs.
func TestExecutionsByTenant(t *testing.T) {
	db := filepath.Join(t.TempDir(), "records.db")
	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.Run{
		{ExecID: "run-a", Tool: "agent_orchestrate", Owner: "alice", UserID: "alice", Tenant: "a", Status: store.StatusSuccess},
		{ExecID: "run-b", Tool: "agent_orchestrate", Owner: "bob", UserID: "bob", Tenant: "b", Status: store.StatusSuccess},
	} {
		if err := st.StartRun(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), append([]string{"executions", "--store", db}, args...), strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := cli("--tenant", "a", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var page struct {
		Executions []struct {
			ExecID string `json:"exec_id"`
			UserID string `json:"user_id"`
			Tenant string `json:"tenant"`
		} `json:"executions"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Executions) != 1 || page.Executions[0].ExecID != "run-a" || page.Executions[0].UserID != "alice" || page.Executions[0].Tenant != "a" {
		t.Errorf("--tenant a lists %+v, want run-a of alice in a", page.Executions)
	}
	if code, _, _ := cli("--tenant", "a", "run-b"); code == ExitOK {
		t.Error("--tenant a read tenant b's run")
	}
	if code, out, _ := cli("run-b"); code != ExitOK || !strings.Contains(out, "run-b") {
		t.Errorf("without --tenant the CLI reads every run: exit %d\n%s", code, out)
	}
}
