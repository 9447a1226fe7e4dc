package cli

import (
	"context"
	"fmt"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

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
