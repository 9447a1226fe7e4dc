// Command orchestra is an MCP server whose tool agent_orchestrate runs a
// whole multi-step tool plan in one call. See README.md; the commands are
// in package cli, which main only calls.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/orchestra-mcp/orchestra/cli"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

func main() {
	// Started as an evaluation worker of json_query or render, the process
	// serves evaluations and exits here.
	builtin.ServeWorker()
	// A client that closes orchestra's stdout or stderr (some close both
	// when they shut a server down) must not kill it mid-run, losing its
	// records: a write to a closed pipe then fails instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
