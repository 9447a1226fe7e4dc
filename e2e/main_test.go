package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// orchestraBin is the binary built once for the tests that run it as a
// subprocess.
var orchestraBin string

// TestMain builds the binary once for every test, and runs them from the
// module's root, where the README's commands run.
func TestMain(m *testing.M) {
	builtin.ServeWorker() // in-process commands evaluate in copies of the test binary
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "orchestra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Commands that keep execution records write them under the test's
	// directory, never the user's.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	orchestraBin = filepath.Join(dir, "orchestra")
	cmd := exec.Command("go", "build", "-o", orchestraBin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building orchestra: %v\n", err)
		return 1
	}
	return m.Run()
}

// TestRunConsoleExporters runs a plan with the OpenTelemetry console
// exporters on: their output goes to stderr, and stdout stays one JSON
// value, the envelope.
func TestRunConsoleExporters(t *testing.T) {
	cmd := exec.Command(orchestraBin, "run", "--store", "memory", "examples/quickstart.json")
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER=console")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orchestra run: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	var env map[string]any
	if err := dec.Decode(&env); err != nil || env["artifact_id"] == nil {
		t.Fatalf("stdout does not start with the envelope: %v", err)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) > 0 || dec.More() {
		t.Fatalf("stdout holds more than the envelope: %.300s", rest)
	}
	if !strings.Contains(stderr.String(), `"SpanContext"`) {
		t.Errorf("the console trace exporter wrote no span to stderr:\n%.2000s", stderr.String())
	}
}
