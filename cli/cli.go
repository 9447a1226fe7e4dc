package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/orchestra-mcp/orchestra/internal/suggest"
)

// The exit codes of [Run], as the README documents them.
const (
	ExitOK      = 0 // success
	ExitFailed  = 1 // the plan ran and did not succeed, or the server failed
	ExitInvalid = 2 // invalid input or usage
)

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis of the arguments
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// commands is every subcommand, in the order usage and the README's CLI
// reference list them.
var commands = []command{
	{"serve", "[--config FILE] [--store PATH] [--http ADDR] [--stateless] [--insecure] [--metrics-addr ADDR]", "Serve MCP over stdio, or Streamable HTTP at /mcp with --http.", cmdServe},
	{"run", "[--config FILE] [--store PATH] [--background --url URL] PLAN.json|-", "Run a plan (the tool's input, or just a plan) and print the result envelope as JSON; with --background, start it in the server at --url and print its exec id.", cmdRun},
	{"wait", "--url URL ID", "Wait for a background run in the server at --url and print its final envelope.", cmdWait},
	{"cancel", "--url URL ID", "Cancel a background run in the server at --url and print its envelope.", cmdCancel},
	{"validate", "[--config FILE] PLAN.json|-", "Check a plan against every plan-time rule without running it.", cmdValidate},
	{"tools", "[--config FILE] [--json]", "List the tools a plan can call, with their schemas.", listing("print the full catalog with input and output schemas as JSON", showTools)},
	{"agents", "[--config FILE] [--json]", "List the configured agents with their tools, models and allowed tools.", listing("print every agent with its tool, model, allowed tools and schemas as JSON", showAgents)},
	{"version", "", "Print the version.", cmdVersion},
	{"executions", "[--store PATH] [--json] [--limit N] [--status S] [ID]", "List recent runs from the execution records, newest first, or show one run's envelope and step records.", cmdExecutions},
	{"resume", "[--config FILE] [--store PATH] [--results FILE|-] ID", "Continue a run: an interrupted, failed or cancelled one runs only the steps that did not succeed; a paused one takes the results of its pending calls.", cmdResume},
	{"plan", `[--config FILE] "goal"|-`, "Ask the configured planner model for a plan and print it, validated, as JSON; nothing runs.", cmdPlan},
	{"ask", `[--config FILE] [--store PATH] [--json] [--fallback reactive] [--context FILE] "goal"|-`, "Plan, run and answer a goal with the configured planner model (two model calls), and print the answer; the run is recorded like run's.", cmdAsk},
	{"insights", "[--store PATH] [--json] [--tool NAME] [list|clear]", "List the lessons learned from past runs that the planner is shown (per tool: what failed and what fixed it), or clear them.", cmdInsights},
	{"ui", "[--store PATH] [--addr ADDR]", "Serve the web viewer of the execution records on loopback and print its URL: the runs, each run's timeline, the insights.", cmdUI},
}

// Command describes a subcommand for its reference documentation.
type Command struct {
	Name    string // e.g. "run"
	Args    string // the synopsis of its arguments
	Summary string // one sentence
}

// Commands returns every subcommand, in order.
func Commands() []Command {
	out := make([]Command, len(commands))
	for i, c := range commands {
		out[i] = Command{Name: c.name, Args: c.args, Summary: c.summary}
	}
	return out
}

// cliEnv is what a subcommand works with.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	cmd            *command       // the command that runs
	closers        []func() error // what the command opened (its app, its store), closed when it returns
}

// close closes what the command opened, the last first.
func (e *cliEnv) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func (e *cliEnv) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "orchestra: "+format+"\n", args...)
}

// usageError prints a usage problem of the command that runs, with its
// synopsis and a hint, and returns ExitInvalid.
func (e *cliEnv) usageError(problem, hint string) int {
	fmt.Fprintf(e.stderr, "orchestra %s: %s\n", e.cmd.name, problem)
	fmt.Fprintf(e.stderr, "usage: orchestra %s %s\n", e.cmd.name, e.cmd.args)
	if hint != "" {
		fmt.Fprintf(e.stderr, "hint: %s\n", hint)
	}
	return ExitInvalid
}

// Run runs the command line args (without the program's name) and returns
// the exit code: 0 success, 1 the plan ran and did not succeed (or the
// server failed), 2 invalid input or usage.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		fmt.Fprintln(stderr, "hint: give a command, e.g. `orchestra run examples/quickstart.json`")
		return ExitInvalid
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return ExitOK
	case "--version", "-version":
		name = "version"
	}
	for i := range commands {
		if c := &commands[i]; c.name == name {
			env.cmd = c
			defer env.close()
			return c.run(ctx, env, args[1:])
		}
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if s := suggest.Closest(name, names, 1); len(s) > 0 {
		fmt.Fprintf(stderr, "orchestra: unknown command %q; did you mean %q?\n", name, s[0])
	} else {
		fmt.Fprintf(stderr, "orchestra: unknown command %q\n", name)
	}
	fmt.Fprintf(stderr, "hint: the commands are %s; run `orchestra help` for more\n", strings.Join(names, ", "))
	return ExitInvalid
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "orchestra runs a whole multi-step tool plan in one MCP tool call.")
	fmt.Fprintln(w, "\nUsage:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  orchestra %s %s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRun `orchestra COMMAND -h` for the flags of a command.")
}
