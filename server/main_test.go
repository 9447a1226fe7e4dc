package server_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// TestMain fails the package when goroutines the tests started outlive
// them: every session, server and plan must end.
func TestMain(m *testing.M) {
	builtin.ServeWorker() // the test binary is its own evaluation worker
	before := runtime.NumGoroutine()
	code := m.Run()
	// Fuzzing starts goroutines of its own (signal handling, workers).
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	if code == 0 && !fuzzing {
		// Allow closed connections a bounded time to unwind.
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			runtime.Gosched()
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			fmt.Fprintf(os.Stderr, "%d goroutines leaked:\n%s\n", n-before, strings.TrimSpace(stacks))
			code = 1
		}
	}
	os.Exit(code)
}
