package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

func cmdInsights(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "insights", &cf)
	cf.storeFlag(fs)
	asJSON := fs.Bool("json", false, "print the insights as JSON")
	tool := fs.String("tool", "", "only the insights of `TOOL`")
	limit := fs.Int("limit", server.DefaultInsightsPage, "list at most `N` insights, the most seen first")
	cursor := fs.String("cursor", "", "list the page after the one that printed this `CURSOR`")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	action := "list"
	switch fs.NArg() {
	case 0:
	case 1:
		action = fs.Arg(0)
	default:
		return env.usageError(fmt.Sprintf("expected at most one action, got %d", fs.NArg()), "use list (the default) or clear")
	}
	if action != "list" && action != "clear" {
		return env.usageError(fmt.Sprintf("unknown action %q", action), "use list (the default) or clear")
	}
	if action == "clear" && *tool != "" {
		return env.usageError("clear forgets every insight; --tool only selects what list shows", "run orchestra insights clear without --tool")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return ExitInvalid
	}
	st, ok := env.openStore(ctx, cfg, store.Options{Logger: logger})
	if !ok {
		return ExitFailed
	}
	if action == "clear" {
		n, err := st.ClearInsights(ctx, store.Scope{})
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		fmt.Fprintf(env.stderr, "orchestra: cleared %d insights from %s\n", n, cfg.Store.Path)
		return ExitOK
	}
	q := store.InsightQuery{}
	if *tool != "" {
		q.Tools = []string{*tool}
	}
	if *limit <= 0 {
		return env.usageError(fmt.Sprintf("--limit %d is not a positive number", *limit), "list fewer: --limit 100")
	}
	page, err := server.ReadInsightsPage(ctx, st, q, *cursor, *limit)
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	if page.Cursor != "" {
		defer fmt.Fprintf(env.stderr, "orchestra: more insights follow: orchestra insights --cursor %s\n", page.Cursor)
	}
	ins := page.Insights
	if *asJSON {
		writeJSON(env.stdout, page)
		return ExitOK
	}
	if len(ins) == 0 {
		fmt.Fprintf(env.stderr, "orchestra: no insights in %s\n", cfg.Store.Path)
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tKIND\tSEEN\tLAST SEEN\tLESSON")
	for _, in := range ins {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", in.Tool, in.Kind, in.Count, in.LastSeen.Local().Format(time.DateTime), in.Lesson)
	}
	tw.Flush()
	return ExitOK
}
