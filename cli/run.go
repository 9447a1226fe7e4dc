package cli

import (
	"context"
	"encoding/json"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "run", &cf)
	cf.storeFlag(fs)
	cf.progressFlag(fs)
	background := fs.Bool("background", false, "start the plan in the server at --url, print its exec id and return; `orchestra wait ID` waits for it")
	url := urlFlag(fs)
	in, code, ok := planInput(env, fs, &cf, args)
	if !ok {
		return code
	}
	req, issues := in.req, in.issues
	if *background != (*url != "") {
		return env.usageError("--background and --url go together", "a background run lives in a server: orchestra run --background --url http://127.0.0.1:8080/mcp PLAN.json")
	}
	if *background && len(issues) == 0 {
		// The decoded request, sent as the tool's input.
		data, err := json.Marshal(req)
		var input map[string]any
		if err == nil {
			err = json.Unmarshal(data, &input)
		}
		if err != nil {
			env.errorf("encoding the request: %v", err)
			return ExitInvalid
		}
		return runBackground(ctx, env, *url, input)
	}
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
