package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
)

// lockDB takes the write lock of the database at path from a connection of
// its own, as another process writing to it would. unlock gives it back.
func lockDB(t *testing.T, path string) (unlock func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
	}
}

// failTool always fails.
func failTool(t testing.TB) registry.Tool {
	return registry.Tool{
		Name: "fail", Description: "Fails. A test tool.", Source: "test",
		InputSchema: mustSchema(t, `{"type":"object"}`),
		Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) {
			return nil, errors.New("boom")
		},
	}
}

// TestRecordsOffTheRunPath runs plans that succeed, fail (a halt skips the
// step after the failure) and are cancelled while another connection holds
// the database's write lock: the runs do not wait for their records. Once
// the lock is released, the records read right after are complete, every
// step with its final status.
func TestRecordsOffTheRunPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orchestra.db")
	var ok, blocker probe
	blocker.block = make(chan struct{}) // never closed: the run is cancelled
	blocker.started = make(chan struct{}, 1)
	app, err := server.New(t.Context(), config.Default(), server.Options{Store: path, Tools: []registry.Tool{
		ok.tool(t, "probe"), blocker.tool(t, "blocker"), failTool(t),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectObs(t, app, nil)

	unlock := lockDB(t, path)
	step := func(id, tool string) map[string]any {
		return map[string]any{"id": id, "tool": tool, "arguments": map[string]any{"label": id}}
	}
	_, succeeded := callPlan(t, cs, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: map[string]any{
		"plan": map[string]any{"steps": []any{step("one", "probe"), step("two", "probe")}},
	}})
	_, failed := callPlan(t, cs, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: map[string]any{
		"plan": map[string]any{"steps": []any{step("first", "probe"), step("broken", "fail"), step("after", "probe")}},
	}})
	ctx, cancel := context.WithCancel(t.Context())
	req, issues := orchestrate.DecodeRequest([]byte(`{"plan": {"steps": [{"id": "waits", "tool": "blocker", "arguments": {"label": "x"}}]}}`))
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	cancelled := make(chan *orchestrate.Envelope, 1)
	go func() { cancelled <- app.Run(ctx, req, "cli") }()
	<-blocker.started
	cancel()
	cancelledEnv := <-cancelled
	unlock()

	for _, c := range []struct {
		name     string
		response any // the envelope the run returned
		status   string
		steps    map[string]string
	}{
		{"succeeded", succeeded, "success", map[string]string{"one": "success", "two": "success"}},
		{"failed", failed, "failed", map[string]string{"first": "success", "broken": "failed", "after": "skipped"}},
		{"cancelled", cancelledEnv, "cancelled", map[string]string{"waits": "cancelled"}},
	} {
		var response map[string]any
		if err := json.Unmarshal([]byte(mustJSON(t, c.response)), &response); err != nil {
			t.Fatal(err)
		}
		var ex server.Execution
		readJSON(t, cs, server.RecordURI(response["artifact_id"].(string)), &ex)
		got := map[string]string{}
		for _, r := range ex.Records {
			got[r.StepID] = r.Status
		}
		if ex.Status != c.status || ex.FinishedAt == nil || mustJSON(t, got) != mustJSON(t, c.steps) {
			t.Errorf("%s run: record %s with steps %v, want %s with %v", c.name, ex.Status, got, c.status, c.steps)
		}
		var recorded map[string]any
		if err := json.Unmarshal(ex.Envelope, &recorded); err != nil || mustJSON(t, recorded) != mustJSON(t, response) {
			t.Errorf("%s run: the record's envelope differs from the response (%v):\nrecord: %s\nresponse: %s", c.name, err, ex.Envelope, mustJSON(t, response))
		}
	}
	var page server.ExecutionPage
	readJSON(t, cs, server.ExecutionsURI, &page)
	if len(page.Executions) != 3 {
		t.Fatalf("orchestra://executions lists %d runs, want 3", len(page.Executions))
	}
	for _, e := range page.Executions {
		if e.Status == "running" {
			t.Errorf("run %s is listed running after its response", e.ExecID)
		}
	}
}
