package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

func cmdExecutions(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "executions", &cf)
	cf.storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON: a page of runs, or one run with its envelope and steps")
	limit := fs.Int("limit", 20, "list at most `N` runs")
	status := fs.String("status", "", "list only runs with `STATUS`: running, paused, success, failed, partial, interrupted or cancelled")
	cursor := fs.String("cursor", "", "continue a listing from the `CURSOR` the previous page printed")
	tenant := fs.String("tenant", "", "show only the runs of tenant `NAME` (\"\" shows every run)")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return env.usageError(fmt.Sprintf("expected at most one ID, got %d", fs.NArg()), "give one exec id, or none to list recent runs")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return ExitInvalid
	}
	st, ok := env.openStore(ctx, cfg, store.Options{Logger: logger, Retention: retention(cfg)})
	if !ok {
		return ExitFailed
	}

	if fs.NArg() == 1 {
		scope := store.Scope{}
		if *tenant != "" {
			scope = store.TenantScope(*tenant)
		}
		run, steps, err := st.GetIn(ctx, scope, fs.Arg(0))
		if errors.Is(err, store.ErrNotFound) {
			env.errorf("no execution record %q in %s", fs.Arg(0), cfg.Store.Path)
			fmt.Fprintln(env.stderr, "hint: run `orchestra executions` to list recent runs, or pass the --store the run was recorded in")
			return ExitFailed
		}
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		ex := server.ExecutionOf(run, steps)
		ex.Pauses, _ = st.Pauses(ctx, run.ExecID)
		if *asJSON {
			writeJSON(env.stdout, ex)
			return ExitOK
		}
		printExecution(env, ex)
		return ExitOK
	}

	opts := store.ListOptions{Limit: *limit, Cursor: *cursor, Status: store.Status(*status)}
	if *tenant != "" {
		opts.Scope = store.TenantScope(*tenant)
	}
	page, err := server.ListPage(ctx, st, opts)
	if err != nil {
		env.errorf("%v", err)
		return ExitInvalid
	}
	if *asJSON {
		writeJSON(env.stdout, page)
		return ExitOK
	}
	if len(page.Executions) == 0 {
		fmt.Fprintf(env.stderr, "orchestra: no execution records in %s\n", cfg.Store.Path)
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXEC ID\tSTARTED\tSTATUS\tSTEPS\tDURATION\tSOURCE\tERROR")
	for _, e := range page.Executions {
		status := e.Status
		if e.Resumable {
			status += " (resumable)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.ExecID, e.StartedAt.Local().Format(time.DateTime), status, e.Steps,
			time.Duration(e.DurationMS)*time.Millisecond, e.Tool, e.Error)
	}
	tw.Flush()
	if page.Next != "" {
		if c := nextCursor(page.Next); c != "" {
			fmt.Fprintf(env.stderr, "more: orchestra executions --cursor %s\n", c)
		}
	}
	return ExitOK
}

// nextCursor returns the cursor of a next-page URI.
func nextCursor(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Query().Get("cursor")
}

// printExecution prints one run for a person: its steps' records in plan
// order, and their timeline.
func printExecution(env *cliEnv, ex server.Execution) {
	w := env.stdout
	fmt.Fprintf(w, "exec id:  %s\nstatus:   %s\nsource:   %s\nstarted:  %s\nduration: %s\n", ex.ExecID, ex.Status, ex.Tool,
		ex.StartedAt.Local().Format(time.RFC3339), time.Duration(ex.DurationMS)*time.Millisecond)
	if ex.ParentExecID != "" {
		fmt.Fprintf(w, "parent:   %s\n", ex.ParentExecID)
	}
	if ex.RequestID != "" {
		fmt.Fprintf(w, "request:  %s\n", ex.RequestID)
	}
	if ex.Error != "" {
		fmt.Fprintf(w, "error:    %s\n", ex.Error)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTOOL\tSTATUS\tATTEMPTS\tDURATION\tERROR")
	order, _ := stepsInOrder(ex)
	for _, n := range order {
		s := ex.Records[n.I]
		errText := ""
		if len(s.Error) > 0 && string(s.Error) != "null" {
			var e struct{ Code, Message string }
			if json.Unmarshal(s.Error, &e) == nil {
				errText = e.Code + ": " + e.Message
			}
		}
		tool := s.Tool
		if tool == "" {
			tool = "(group)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t%s\t%s\n", strings.Repeat("  ", n.Depth), s.StepID, tool, s.Status, s.Attempts, time.Duration(s.DurationMS)*time.Millisecond, errText)
	}
	tw.Flush()
	printTimeline(w, ex, time.Now())
	for _, p := range ex.Pauses {
		fmt.Fprintf(w, "\n%s at %s", p.Event, p.At.Local().Format(time.RFC3339))
	}
	if ex.Resumable {
		fmt.Fprintf(w, "\n\ncontinue it: orchestra resume %s", ex.ExecID)
	}
	fmt.Fprintf(w, "\nthe envelope: orchestra executions --json %s\n", ex.ExecID)
}
