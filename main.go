// Command orchestra is an MCP server whose tool agent_orchestrate runs a
// whole multi-step tool plan in one call. See README.md; the commands are
// in package cli.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/orchestra-mcp/orchestra/cli"
)

func main() {
	// A client that closes orchestra's stdout or stderr (some close both
	// when they shut a server down) must not kill it mid-run, losing its
	// records: a write to a closed pipe then fails instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(ctx, args, stdin, stdout, stderr)
}
