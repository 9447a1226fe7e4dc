package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

// cmdResume continues a run: an interrupted or failed one runs the steps
// that did not succeed; a paused one goes on with the results of its
// pending calls (--results, a JSON object by step id).
func cmdResume(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "resume", &cf)
	cf.storeFlag(fs)
	resultsFile := fs.String("results", "", "for a paused run: a JSON `FILE` (or - for stdin) of the pending calls' results by step id")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return env.usageError(fmt.Sprintf("expected one exec id, got %d", fs.NArg()), "`orchestra executions` lists the runs and which can be resumed")
	}
	var results map[string]any
	if *resultsFile != "" {
		var data []byte
		var err error
		if *resultsFile == "-" {
			data, err = io.ReadAll(env.stdin)
		} else {
			data, err = os.ReadFile(*resultsFile)
		}
		if err == nil {
			err = json.Unmarshal(data, &results)
		}
		if err != nil {
			return env.usageError(fmt.Sprintf("reading --results: %v", err), `the results are a JSON object by step id: {"edit": {"diff": "..."}}`)
		}
	}
	app, ok := env.openApp(ctx, &cf, server.Options{})
	if !ok {
		return ExitInvalid
	}
	result := app.Run(ctx, &orchestrate.Request{Resume: &orchestrate.ResumeRequest{ExecID: fs.Arg(0), Results: results}}, "cli")
	return printResult(env, result)
}
