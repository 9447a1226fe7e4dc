package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
)

// listing returns a command that lists what the app holds, as a table or,
// with --json (whose usage is jsonUsage), as JSON: show prints it.
func listing(jsonUsage string, show func(env *cliEnv, app *server.App, asJSON bool) int) func(ctx context.Context, env *cliEnv, args []string) int {
	return func(ctx context.Context, env *cliEnv, args []string) int {
		var cf commonFlags
		fs := newFlagSet(env, env.cmd.name, &cf)
		asJSON := fs.Bool("json", false, jsonUsage)
		if code, ok := parse(env, fs, args); !ok {
			return code
		}
		if code, ok := noArgs(env, fs, env.cmd.name+" takes only flags"); !ok {
			return code
		}
		app, ok := env.openApp(ctx, &cf, server.Options{})
		if !ok {
			return ExitInvalid
		}
		return show(env, app, *asJSON)
	}
}

// showTools prints the app's catalog and downstream servers.
func showTools(env *cliEnv, app *server.App, asJSON bool) int {
	tools := app.Catalog.List()
	if asJSON {
		type entry struct {
			Name          string `json:"name"`
			Source        string `json:"source"`
			Mode          string `json:"mode"`
			Description   string `json:"description"`
			InputSchema   any    `json:"inputSchema"`
			OutputSchema  any    `json:"outputSchema,omitempty"`
			SchemaProblem string `json:"schema_problem,omitempty"`
		}
		out := []entry{}
		for _, t := range tools {
			e := entry{Name: t.Name, Source: t.Source, Mode: t.Mode.String(), Description: t.Description, SchemaProblem: t.SchemaProblem, InputSchema: t.InputSchema}
			if t.OutputSchema != nil {
				e.OutputSchema = t.OutputSchema
			}
			out = append(out, e)
		}
		servers := app.Downstream()
		if servers == nil {
			servers = []mcpserver.ServerStatus{}
		}
		writeJSON(env.stdout, map[string]any{"tools": out, "servers": servers})
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSOURCE\tOUTPUT SCHEMA\tSUMMARY")
	for _, t := range tools {
		out := "yes"
		if t.OutputSchema == nil {
			out = "no"
		}
		if t.SchemaProblem != "" {
			out = "unusable: " + t.SchemaProblem
		}
		summary, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Source, out, summary)
	}
	tw.Flush()
	if servers := app.Downstream(); len(servers) > 0 {
		fmt.Fprintln(env.stdout)
		tw = tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tSTATE\tTOOLS\tPROBLEMS")
		for _, st := range servers {
			var problems []string
			if st.Error != "" {
				problems = append(problems, st.Error)
			}
			problems = append(problems, st.ToolProblems...)
			for _, name := range slices.Sorted(maps.Keys(st.SchemaProblems)) {
				problems = append(problems, fmt.Sprintf("%s: schema unusable: %s", name, st.SchemaProblems[name]))
			}
			if len(problems) == 0 {
				problems = []string{"-"}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", st.Name, st.State, len(st.Tools), strings.Join(problems, "; "))
		}
		tw.Flush()
	}
	return ExitOK
}
