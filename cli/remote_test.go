package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
)

// TestBackgroundRunWaitCancel: orchestra run --background starts a plan in
// the server at --url and prints its exec id at once, while its step
// waits; orchestra wait prints the final envelope once the run ends;
// orchestra cancel stops another run, whose step is then cancelled.
func TestBackgroundRunWaitCancel(t *testing.T) {
	started, release, stopped := make(chan struct{}, 4), make(chan struct{}), make(chan struct{}, 4)
	gate := registry.Tool{
		Name: "gate", Description: "Waits until the test lets it end. A test tool.", Source: "test",
		InputSchema: &jsonschema.Schema{Type: "object"},
		Call: func(ctx context.Context, _ *registry.CallRequest) (*registry.Result, error) {
			started <- struct{}{}
			select {
			case <-release:
				return &registry.Result{Structured: map[string]any{"ok": true}}, nil
			case <-ctx.Done():
				stopped <- struct{}{}
				return nil, ctx.Err()
			}
		},
	}
	app, err := server.New(t.Context(), config.Default(), server.Options{Tools: []registry.Tool{gate}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"steps": [{"id": "g", "tool": "gate", "arguments": {}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := Run(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	within := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}

	code, out, errOut := run("run", "--background", "--url", url, plan)
	id := strings.TrimSpace(out)
	if code != ExitOK || id == "" || strings.Contains(id, "\n") {
		t.Fatalf("run --background: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	within(started, "the step") // printed while the step waits
	type result struct {
		code int
		out  string
	}
	waited := make(chan result, 1)
	go func() {
		code, out, _ := run("wait", "--url", url, id)
		waited <- result{code, out}
	}()
	release <- struct{}{}
	var w result
	select {
	case w = <-waited:
	case <-time.After(time.Minute):
		t.Fatal("wait did not return when the run ended")
	}
	var env orchestrate.Envelope
	if err := json.Unmarshal([]byte(w.out), &env); err != nil || w.code != ExitOK || env.Artifact.Status != orchestrate.StatusSuccess || env.Metadata.ExecID != id {
		t.Fatalf("wait: exit %d, %v, %s", w.code, err, w.out)
	}

	code, out, _ = run("run", "--background", "--url", url, plan)
	id2 := strings.TrimSpace(out)
	within(started, "the second run's step")
	code, out, errOut = run("cancel", "--url", url, id2)
	within(stopped, "the cancelled step")
	env = orchestrate.Envelope{}
	if err := json.Unmarshal([]byte(out), &env); err != nil || code != ExitOK || env.Artifact.Status != orchestrate.StatusCancelled || len(env.Artifact.Steps) != 1 || env.Artifact.Steps[0].Status != orchestrate.StatusCancelled {
		t.Fatalf("cancel: exit %d, %v, %s %s", code, err, out, errOut)
	}

	if code, _, errOut := run("wait", "--url", url, "no-such-run"); code != ExitInvalid || !strings.Contains(errOut, string(orchestrate.CodeUnknownRun)) {
		t.Errorf("wait of an unknown run: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run("run", "--background", plan); code != ExitInvalid || !strings.Contains(errOut, "--url") {
		t.Errorf("run --background without --url: exit %d, %s", code, errOut)
	}
}
