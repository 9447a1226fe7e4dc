package cli

import (
	"context"
	"fmt"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "run", &cf)
	cf.storeFlag(fs)
	cf.progressFlag(fs)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return exitInvalid
	}
	req, issues, code, ok := planInput(env, "run", fs, cfg)
	if !ok {
		return code
	}
	defer cf.closeView()
	app, ok := newAppWith(ctx, env, cfg, logger, server.Options{Hooks: cf.hooks()})
	if !ok {
		return exitInvalid
	}
	defer app.Close()
	var result *orchestrate.Envelope
	switch {
	case len(issues) > 0:
		result = app.Reject(ctx, issues, "cli")
	case req.Plan == nil:
		result = app.Reject(ctx, []*orchestrate.Issue{{Path: "prompt", Code: orchestrate.CodePlannerFailed, Message: "orchestra run takes a plan; no planner is configured to turn a prompt into one"}}, "cli")
	default:
		result = app.Run(ctx, req, "cli")
	}
	cf.closeView()
	writeJSON(env.stdout, result)
	fmt.Fprintln(env.stderr, result.Summary())
	switch {
	case len(result.Artifact.ValidationErrors) > 0:
		return exitInvalid
	case result.Artifact.Status == orchestrate.StatusAwaitingClient:
		return exitOK // paused: orchestra resume ID --results FILE goes on
	case !result.Artifact.Success:
		return exitFailed
	}
	return exitOK
}
