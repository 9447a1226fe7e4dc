package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/server"
)

func cmdPlan(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "plan", &cf)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	goal, code, ok := goalInput(env, "plan", fs.Args())
	if !ok {
		return code
	}
	p, _, code, ok := plannerFor(ctx, env, "plan", &cf)
	if !ok {
		return code
	}
	res, err := p.Plan(ctx, &orchestrate.Request{Prompt: goal})
	if err != nil {
		env.errorf("planning: %v", err)
		for _, is := range res.Issues {
			fmt.Fprintf(env.stderr, "- %s [%s]\n", is.Error(), is.Code)
		}
		if res.Info.LastAnswer != "" {
			fmt.Fprintf(env.stderr, "the model's last answer:\n%s\n", res.Info.LastAnswer)
		}
		return ExitFailed
	}
	writeJSON(env.stdout, res.Plan)
	fmt.Fprintln(env.stderr, plannerSummary(res.Info))
	return ExitOK
}

// goalInput reads the goal: the arguments joined, or stdin for "-".
func goalInput(env *cliEnv, cmd string, args []string) (string, int, bool) {
	if len(args) == 0 {
		return "", env.usageError("missing goal", `say what to do in quotes: orchestra `+cmd+` "summarize the open issues", or - to read it from stdin`), false
	}
	goal := strings.Join(args, " ")
	if goal == "-" {
		data, err := io.ReadAll(io.LimitReader(env.stdin, 1<<20))
		if err != nil {
			env.errorf("reading the goal: %v", err)
			return "", ExitInvalid, false
		}
		goal = string(data)
	}
	if strings.TrimSpace(goal) == "" {
		return "", env.usageError("the goal is empty", "say what to do"), false
	}
	return goal, 0, true
}

// plannerFor builds the app and its configured planner; Run closes the
// app when the command returns.
func plannerFor(ctx context.Context, env *cliEnv, cmd string, cf *commonFlags) (*planner.Planner, *server.App, int, bool) {
	app, ok := env.openApp(ctx, cf, server.Options{})
	if !ok {
		return nil, nil, ExitInvalid, false
	}
	p, err := app.Planner()
	if err != nil {
		return nil, nil, env.usageError("no planner model is configured", strings.TrimPrefix(err.Error(), "no planner is configured; ")+"\nthen run: orchestra "+cmd+" --config FILE \"goal\""), false
	}
	return p, app, 0, true
}
