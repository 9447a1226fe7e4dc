package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

// init adds the planner's commands. It runs after cli.go's init, which
// sets the list (files initialize in name order).
func init() {
	commands = append(commands,
		command{"plan", `[--config FILE] "goal"|-`, "Ask the configured planner model for a plan and print it, validated, as JSON; nothing runs.", cmdPlan},
		command{"ask", `[--config FILE] [--json] "goal"|-`, "Plan, run and answer a goal with the configured planner model (two model calls), and print the answer.", cmdAsk},
	)
}

// goalInput reads the goal: the arguments joined, or stdin for "-".
func goalInput(env *cliEnv, cmd string, args []string) (string, int, bool) {
	if len(args) == 0 {
		return "", env.usageError(cmd, "missing goal", `say what to do in quotes: orchestra `+cmd+` "summarize the open issues", or - to read it from stdin`), false
	}
	goal := strings.Join(args, " ")
	if goal == "-" {
		data, err := io.ReadAll(io.LimitReader(env.stdin, 1<<20))
		if err != nil {
			env.errorf("reading the goal: %v", err)
			return "", exitInvalid, false
		}
		goal = string(data)
	}
	if strings.TrimSpace(goal) == "" {
		return "", env.usageError(cmd, "the goal is empty", "say what to do"), false
	}
	return goal, 0, true
}

// plannerFor builds the app and its configured planner.
func plannerFor(ctx context.Context, env *cliEnv, cmd string, cf *commonFlags) (*planner.Planner, func(), int, bool) {
	cfg, logger, ok := cf.load(env)
	if !ok {
		return nil, nil, exitInvalid, false
	}
	app, ok := newApp(ctx, env, cfg, logger)
	if !ok {
		return nil, nil, exitInvalid, false
	}
	p, err := app.Planner()
	if err != nil {
		app.Close()
		return nil, nil, env.usageError(cmd, "no planner model is configured", strings.TrimPrefix(err.Error(), "no planner is configured; ")+"\nthen run: orchestra "+cmd+" --config FILE \"goal\""), false
	}
	return p, func() { app.Close() }, 0, true
}

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
	p, closeApp, code, ok := plannerFor(ctx, env, "plan", &cf)
	if !ok {
		return code
	}
	defer closeApp()
	res, err := p.Plan(ctx, &orchestrate.Request{Prompt: goal})
	if err != nil {
		env.errorf("planning: %v", err)
		for _, is := range res.Issues {
			fmt.Fprintf(env.stderr, "- %s [%s]\n", is.Error(), is.Code)
		}
		if res.Info.LastAnswer != "" {
			fmt.Fprintf(env.stderr, "the model's last answer:\n%s\n", res.Info.LastAnswer)
		}
		return exitFailed
	}
	writeJSON(env.stdout, res.Plan)
	fmt.Fprintln(env.stderr, plannerSummary(res.Info))
	return exitOK
}

func cmdAsk(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "ask", &cf)
	asJSON := fs.Bool("json", false, "print the whole result envelope as JSON instead of only the answer")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	goal, code, ok := goalInput(env, "ask", fs.Args())
	if !ok {
		return code
	}
	p, closeApp, code, ok := plannerFor(ctx, env, "ask", &cf)
	if !ok {
		return code
	}
	defer closeApp()
	result, err := p.Ask(ctx, &orchestrate.Request{Prompt: goal})
	if err != nil {
		env.errorf("%v", err)
		return exitFailed
	}
	a := result.Artifact
	if *asJSON {
		writeJSON(env.stdout, result)
	} else if a.Response != "" {
		fmt.Fprintln(env.stdout, a.Response)
	}
	fmt.Fprintln(env.stderr, result.Summary())
	if a.Planner != nil {
		fmt.Fprintln(env.stderr, plannerSummary(a.Planner))
	}
	if !a.Success {
		return exitFailed
	}
	return exitOK
}

// plannerSummary says what the model calls cost.
func plannerSummary(info *orchestrate.PlannerInfo) string {
	calls := "calls"
	if info.ModelCalls == 1 {
		calls = "call"
	}
	s := fmt.Sprintf("planner: %d model %s (%s), %d input and %d output tokens", info.ModelCalls, calls, info.Model, info.InputTokens, info.OutputTokens)
	if info.Fallback != "" {
		s += ", fallback " + info.Fallback
	}
	return s
}
