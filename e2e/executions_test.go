package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/cli"
	"github.com/orchestra-mcp/orchestra/store"
)

// TestKilledRunIsInterrupted runs `orchestra run` as a child process on a
// plan whose second step waits on a slow HTTP server, kills it with SIGKILL
// while that step runs, and checks that the next start finds a database
// that opens cleanly, with the run and its running step interrupted, and
// that orchestra executions shows it.
func TestKilledRunIsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Write([]byte(`{}`))
	}))
	defer slow.Close()
	defer close(release)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "orchestra.yaml")
	db := filepath.Join(dir, "orchestra.db")
	if err := os.WriteFile(cfg, []byte("builtins:\n  http_request:\n    allowed_hosts: [\"127.0.0.1\"]\n    allow_private_networks: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := `{"plan": {"steps": [
		{"id": "first", "tool": "json_query", "arguments": {"query": ".n", "input": {"n": 1}}},
		{"id": "slow", "tool": "http_request", "arguments": {"url": "` + slow.URL + `/wait"}},
		{"id": "never", "tool": "json_query", "arguments": {"query": ".", "input": {}}}
	]}}`
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(plan), 0o600); err != nil {
		t.Fatal(err)
	}
	killMidStep(t, cfg, db, planFile, started, "slow")

	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatalf("the database does not open after the kill: %v", err)
	}
	stats, err := st.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	runs, _, err := st.List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Recovered != 1 || len(runs) != 1 || runs[0].Status != store.StatusInterrupted {
		t.Fatalf("after the kill: recovered %d, runs %+v; want one interrupted run", stats.Recovered, runs)
	}
	_, steps, err := st.Get(t.Context(), runs[0].ExecID)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, s := range steps {
		status[s.StepID] = s.Status
	}
	if status["first"] != "success" || status["slow"] != "interrupted" {
		t.Fatalf("step records %v: want first success and slow interrupted", status)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), []string{"executions", "--store", db, "--json", runs[0].ExecID}, strings.NewReader(""), &out, &errOut); code != cli.ExitOK {
		t.Fatalf("orchestra executions exited %d: %s", code, errOut.String())
	}
	var ex struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &ex); err != nil || ex.Status != "interrupted" || ex.Error == "" {
		t.Fatalf("orchestra executions --json: %s (%v)", out.String(), err)
	}
}

// killMidStep runs planFile with `orchestra run` on the store db, waits
// until step stepID has started (started is closed) and its start is on
// disk (records are committed in the background, shortly after), then
// kills the process with SIGKILL.
func killMidStep(t *testing.T, cfg, db, planFile string, started <-chan struct{}, stepID string) {
	t.Helper()
	cmd := exec.Command(orchestraBin, "run", "--config", cfg, "--store", db, planFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("step %s never started:\n%s", stepID, stderr.String())
	}
	if err := waitForStep(db, stepID, "running", 30*time.Second); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// waitForStep polls the database at path, read-only, until the record of
// step stepID has the status, or the timeout passes.
func waitForStep(path, stepID, status string, timeout time.Duration) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		var got string
		err := db.QueryRow(`SELECT status FROM steps WHERE step_id = ?`, stepID).Scan(&got)
		if err == nil && got == status {
			return nil
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reading the record of step %s: %w", stepID, err)
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("step %s is %q in the records after %s, want %q", stepID, got, timeout, status)
		}
	}
}
