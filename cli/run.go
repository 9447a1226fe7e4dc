package cli

import (
	"context"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "run", &cf)
	cf.storeFlag(fs)
	cf.progressFlag(fs)
	in, code, ok := planInput(env, fs, &cf, args)
	if !ok {
		return code
	}
	req, issues := in.req, in.issues
	app, ok := env.newApp(ctx, in.cfg, in.logger, server.Options{Hooks: cf.hooks()})
	if !ok {
		return ExitInvalid
	}
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
	return printResult(env, result)
}
