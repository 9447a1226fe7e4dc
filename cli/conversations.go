package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/store"
)

// cmdConversations lists the conversations kept (every caller's: the
// command line is the machine's own), shows one's turns, or clears one or
// all. --owner narrows to one caller's.
func cmdConversations(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "conversations", &cf)
	cf.storeFlag(fs)
	asJSON := fs.Bool("json", false, "print as JSON")
	owner := fs.String("owner", "", "only the conversations of `OWNER` (a record's owner, e.g. static:alice)")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	hint := "use list (the default), show ID or clear [ID]"
	action, id := "list", ""
	switch fs.NArg() {
	case 0:
	case 1:
		action = fs.Arg(0)
	case 2:
		action, id = fs.Arg(0), fs.Arg(1)
	default:
		return env.usageError(fmt.Sprintf("expected an action and at most one id, got %d arguments", fs.NArg()), hint)
	}
	switch {
	case action != "list" && action != "show" && action != "clear":
		return env.usageError(fmt.Sprintf("unknown action %q", action), hint)
	case action == "show" && id == "":
		return env.usageError("show needs the context id of a conversation", "orchestra conversations show ID (list prints them)")
	case action == "list" && id != "":
		return env.usageError("list takes no id", "orchestra conversations show "+id)
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return ExitInvalid
	}
	st, ok := env.openStore(ctx, cfg, store.Options{Logger: logger, Retention: retention(cfg)})
	if !ok {
		return ExitFailed
	}
	scope := store.Scope{}
	if *owner != "" {
		scope = store.OwnerScope(*owner)
	}
	switch action {
	case "clear":
		n, err := st.ClearConversations(ctx, scope, id)
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		fmt.Fprintf(env.stderr, "orchestra: cleared %d turns from %s\n", n, cfg.Store.Path)
		return ExitOK
	case "show":
		turns, err := st.TurnsIn(ctx, scope, id)
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		if *asJSON {
			writeJSON(env.stdout, map[string]any{"context_id": id, "turns": turns})
			return ExitOK
		}
		for _, t := range turns {
			fmt.Fprintf(env.stdout, "#%d  %s  %s\n  goal:   %s\n  answer: %s\n", t.Seq, t.At.Local().Format(time.DateTime), t.ExecID,
				oneLine(t.Goal), oneLine(t.Answer))
		}
		return ExitOK
	}
	list, err := st.Conversations(ctx, scope, 0)
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	if *asJSON {
		writeJSON(env.stdout, map[string]any{"conversations": list})
		return ExitOK
	}
	if len(list) == 0 {
		fmt.Fprintf(env.stderr, "orchestra: no conversations in %s\n", cfg.Store.Path)
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTEXT ID\tOWNER\tTENANT\tTURNS\tLAST")
	for _, c := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", c.ContextID, orDash(c.Owner), orDash(c.Tenant), c.Turns, c.Last.Local().Format(time.DateTime))
	}
	tw.Flush()
	return ExitOK
}

// oneLine is s on one line, cut for a terminal.
func oneLine(s string) string {
	return textcut.Truncate(strings.Join(strings.Fields(s), " "), 200)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
