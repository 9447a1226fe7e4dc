package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "run", &cf)
	cf.storeFlag(fs)
	background := fs.Bool("background", false, "start the plan in the server at --url, print its exec id and return; `orchestra wait ID` waits for it")
	url := urlFlag(fs)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if *background != (*url != "") {
		return env.usageError("--background and --url go together", "a background run lives in a server: orchestra run --background --url http://127.0.0.1:8080/mcp PLAN.json")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return exitInvalid
	}
	if *background {
		if fs.NArg() != 1 {
			return env.usageError(fmt.Sprintf("expected one PLAN argument, got %d", fs.NArg()), "give a plan file, or - to read the plan from stdin")
		}
		data, err := readInput(env, fs.Arg(0), cfg.Server.MaxRequestBytes)
		var input map[string]any
		if err == nil {
			err = json.Unmarshal(data, &input)
		}
		if err != nil {
			return env.usageError(fmt.Sprintf("reading the plan: %v", err), "give a plan file holding the tool's input ({\"plan\": ...}) or just a plan, or - to read it from stdin")
		}
		_, p := input["plan"]
		_, q := input["prompt"]
		_, r := input["resume"]
		if !p && !q && !r {
			input = map[string]any{"plan": input} // just a plan
		}
		return runBackground(ctx, env, *url, input)
	}
	req, issues, code, ok := planInput(env, "run", fs, cfg)
	if !ok {
		return code
	}
	app, ok := newApp(ctx, env, cfg, logger)
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
