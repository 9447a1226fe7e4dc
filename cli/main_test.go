package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// TestMain runs the command tests from the module's root, as the README's
// commands run (examples/agents/config.yaml names its script by a path
// from there), with execution records kept under a directory of their own.
func TestMain(m *testing.M) {
	builtin.ServeWorker() // the test binary is its own evaluation worker
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "orchestra-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Commands that keep execution records write them under the test's
	// directory, never the user's.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
