package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

func cmdAsk(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "ask", &cf)
	cf.storeFlag(fs)
	cf.progressFlag(fs)
	asJSON := fs.Bool("json", false, "print the whole result envelope as JSON instead of only the answer")
	fallback := fs.String("fallback", "", "`reactive` runs a bounded tool loop when no valid plan can be made; none does not (default planner.fallback)")
	contextFile := fs.String("context", "", "read the caller's context from `FILE` (JSON: {instructions, history: [{role, content}], facts}), for the planner and the answer")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if *fallback != "" && *fallback != planner.FallbackReactive && *fallback != "none" {
		return env.usageError(fmt.Sprintf("invalid --fallback %q", *fallback), "use --fallback reactive or --fallback none")
	}
	goal, code, ok := goalInput(env, "ask", fs.Args())
	if !ok {
		return code
	}
	req := &orchestrate.Request{Prompt: goal, Fallback: *fallback}
	if *contextFile != "" {
		c, err := readContext(env, *contextFile)
		if err != nil {
			env.errorf("reading the context: %v", err)
			fmt.Fprintln(env.stderr, `hint: the context file holds {"instructions": "...", "history": [{"role": "user", "content": "..."}], "facts": {...}}`)
			return ExitInvalid
		}
		req.Context = c
	}
	p, app, code, ok := plannerFor(ctx, env, "ask", &cf)
	if !ok {
		return code
	}
	result, err := p.Ask(ctx, req)
	cf.closeView()
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	// The record gets what the planner added after the run: the answer and
	// the RESPOND call.
	if result.ArtifactID != "" {
		if data, err := json.Marshal(result); err == nil {
			if err := app.Store().UpdateEnvelope(ctx, result.ArtifactID, data); err != nil {
				env.errorf("recording the answer: %v", err)
			}
		}
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
		return ExitFailed
	}
	return ExitOK
}

// readContext reads a caller's context file.
func readContext(env *cliEnv, path string) (*orchestrate.CallerContext, error) {
	data, err := readInput(env, path, jsongate.Default(config.DefaultMaxRequestBytes))
	if err != nil {
		return nil, err
	}
	req, issues := orchestrate.DecodeRequest(append(append([]byte(`{"prompt":"-","context":`), data...), '}'))
	if len(issues) > 0 {
		return nil, errors.New(issues[0].Error())
	}
	return req.Context, nil
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
