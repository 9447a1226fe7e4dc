package cli

import (
	"context"
	"fmt"

	"github.com/orchestra-mcp/orchestra/internal/plural"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

func cmdValidate(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "validate", &cf)
	in, code, ok := planInput(env, fs, &cf, args)
	if !ok {
		return code
	}
	req, issues := in.req, in.issues
	type report struct {
		Valid    bool                 `json:"valid"`
		Errors   []*orchestrate.Issue `json:"errors"`
		Warnings []*orchestrate.Issue `json:"warnings"`
		Plan     *orchestrate.Plan    `json:"plan,omitempty"`
	}
	rep := report{Errors: issues, Warnings: []*orchestrate.Issue{}}
	if len(issues) == 0 {
		if req.Plan == nil {
			rep.Errors = []*orchestrate.Issue{{Path: "prompt", Code: orchestrate.CodeInvalidRequest, Message: "validate checks plans; this input has a prompt and no plan"}}
		} else {
			app, ok := env.newApp(ctx, in.cfg, in.logger, server.Options{})
			if !ok {
				return ExitInvalid
			}
			v := app.Engine.Validate(req)
			rep.Errors, rep.Warnings, rep.Plan = v.Errors, v.Warnings, req.Plan
		}
	}
	rep.Valid = len(rep.Errors) == 0
	writeJSON(env.stdout, rep)
	if !rep.Valid {
		fmt.Fprintf(env.stderr, "orchestra validate: the plan has %s\n", plural.Count(len(rep.Errors), "problem"))
		return ExitInvalid
	}
	return ExitOK
}
