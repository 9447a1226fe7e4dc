package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

// cmdResume continues a run: an interrupted, failed or cancelled one runs the steps
// that did not succeed; a paused one goes on with the results of its
// pending calls (--results, a JSON object by step id).
func cmdResume(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "resume", &cf)
	cf.storeFlag(fs)
	cf.progressFlag(fs)
	resultsFile := fs.String("results", "", "for a paused run: a JSON `FILE` (or - for stdin) of the pending calls' results by step id")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return env.usageError(fmt.Sprintf("expected one exec id, got %d", fs.NArg()), "`orchestra executions` lists the runs and which can be resumed")
	}
	app, ok := env.openApp(ctx, &cf, server.Options{})
	if !ok {
		return ExitInvalid
	}
	var results map[string]any
	if *resultsFile != "" {
		// The results pass the gate a request's do.
		data, err := readInput(env, *resultsFile, app.Config.Server.RequestGate())
		if err == nil {
			err = json.Unmarshal(data, &results)
		}
		if err != nil {
			return env.usageError(fmt.Sprintf("reading --results: %v", err), `the results are a JSON object by step id: {"edit": {"diff": "..."}}`)
		}
	}
	result := app.Run(ctx, &orchestrate.Request{Resume: &orchestrate.ResumeRequest{ExecID: fs.Arg(0), Results: results}}, "cli")
	cf.closeView()
	return printResult(env, result)
}
