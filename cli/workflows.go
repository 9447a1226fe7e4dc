package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/workflows"
)

const workflowsHint = "use list, show NAME, save EXEC_ID --name NAME, delete NAME, export [NAME...] or import FILE"

func cmdWorkflows(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "workflows", &cf)
	cf.storeFlag(fs)
	asJSON := fs.Bool("json", false, "list: print JSON")
	name := fs.String("name", "", "save: the workflow's `NAME` (its tool is workflow__NAME)")
	desc := fs.String("description", "", "save: what the workflow does, its tool's `DESCRIPTION`")
	version := fs.Int("version", 0, "show: the `N`th version (default the newest)")
	owner := fs.String("owner", "", "show, delete, export, import: the `USER` whose workflows (default the machine's own callers)")
	tenant := fs.String("tenant", "", "show, delete, export, import: the `TENANT` of that user")
	// Flags may follow the arguments: workflows save EXEC_ID --name NAME.
	var pos []string
	for {
		if code, ok := parse(env, fs, args); !ok {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) == 0 {
		return env.usageError("missing action", workflowsHint)
	}
	action, rest := pos[0], pos[1:]
	want := map[string][2]int{"list": {0, 0}, "show": {1, 1}, "save": {1, 1}, "delete": {1, 1}, "export": {0, -1}, "import": {1, 1}}
	n, known := want[action]
	if !known {
		return env.usageError(fmt.Sprintf("unknown action %q", action), workflowsHint)
	}
	if len(rest) < n[0] || (n[1] >= 0 && len(rest) > n[1]) {
		return env.usageError(fmt.Sprintf("%s takes %d argument(s), got %d", action, n[0], len(rest)), workflowsHint)
	}
	if action == "save" && *name == "" {
		return env.usageError("save needs --name", "orchestra workflows save EXEC_ID --name weekly_report")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return ExitInvalid
	}
	switch action {
	case "save", "import":
		// Both check the workflow against the catalog: the app starts the
		// configured servers.
		app, ok := env.newApp(ctx, cfg, logger, server.Options{})
		if !ok {
			return ExitFailed
		}
		if action == "save" {
			return saveWorkflow(ctx, env, app, rest[0], orchestrate.SaveAs{Name: *name, Description: *desc})
		}
		return importWorkflows(ctx, env, app, rest[0], *owner, *tenant)
	}
	st, ok := env.openStore(ctx, cfg, store.Options{Logger: logger})
	if !ok {
		return ExitFailed
	}
	switch action {
	case "list":
		return listWorkflows(ctx, env, cfg, st, *asJSON)
	case "show":
		return showWorkflow(ctx, env, cfg, st, store.OwnerScope(*owner).InTenant(*tenant), rest[0], *version)
	case "delete":
		if _, configured := cfg.Workflows[rest[0]]; configured {
			env.errorf("workflow %q is configured, not stored", rest[0])
			fmt.Fprintln(env.stderr, "hint: remove it from the workflows block of the configuration file")
			return ExitFailed
		}
		n, err := st.DeleteWorkflow(ctx, store.OwnerScope(*owner).InTenant(*tenant), rest[0])
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		fmt.Fprintf(env.stderr, "orchestra: deleted %d version(s) of workflow %s; a running server on this store unlists it within %s, and a call of it fails at once\n", n, rest[0], server.DefaultWorkflowPoll)
		return ExitOK
	}
	return exportWorkflows(ctx, env, cfg, st, store.OwnerScope(*owner).InTenant(*tenant), rest)
}

func saveWorkflow(ctx context.Context, env *cliEnv, app *server.App, execID string, sa orchestrate.SaveAs) int {
	run, _, err := app.Store().GetIn(ctx, store.Scope{}, execID)
	if errors.Is(err, store.ErrNotFound) {
		env.errorf("no execution record %q", execID)
		fmt.Fprintln(env.stderr, "hint: run `orchestra executions` to list recent runs, or pass the --store the run was recorded in")
		return ExitFailed
	}
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	if run.Status != store.StatusSuccess {
		env.errorf("run %s is %s; only a run that succeeded is kept as a workflow", execID, run.Status)
		return ExitFailed
	}
	res, err := app.Store().ResumableIn(ctx, store.Scope{}, execID)
	if err != nil {
		env.errorf("run %s kept no request to save (%v)", execID, err)
		fmt.Fprintln(env.stderr, "hint: runs keep their plan and bindings when they start; run the plan again and save that run")
		return ExitFailed
	}
	req, issues := orchestrate.DecodeRequest(res.Request)
	if len(issues) > 0 || req.Plan == nil {
		env.errorf("run %s: its kept request does not decode to a plan", execID)
		return ExitFailed
	}
	w, err := app.SaveWorkflow(ctx, run.Owner, run.Tenant, sa, req.Plan, req.Bindings, execID)
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	fmt.Fprintf(env.stderr, "orchestra: saved run %s as workflow %s version %d (tool %s) with %d parameter(s)\n",
		execID, w.Name, w.Version, workflows.ToolName(w.Name), len(w.Parameters.Properties))
	return ExitOK
}

// exported is the file export writes and import reads: the configuration's
// workflows block.
type exported struct {
	Workflows map[string]workflows.Config `yaml:"workflows"`
}

func importWorkflows(ctx context.Context, env *cliEnv, app *server.App, path, owner, tenant string) int {
	data, err := readInput(env, path, jsongate.Limits{Bytes: config.MaxFileBytes})
	if err != nil {
		env.errorf("reading %s: %v", path, err)
		return ExitInvalid
	}
	var in exported
	if err := yaml.Unmarshal(data, &in); err != nil {
		env.errorf("%s: %v", path, err)
		fmt.Fprintln(env.stderr, "hint: the file is a workflows block, as orchestra workflows export writes it")
		return ExitInvalid
	}
	if len(in.Workflows) == 0 {
		env.errorf("%s has no workflows", path)
		return ExitInvalid
	}
	failed := false
	for _, name := range slices.Sorted(maps.Keys(in.Workflows)) {
		c := in.Workflows[name]
		w, err := workflows.FromConfig(name, c)
		if err == nil {
			w.Owner, w.Tenant = owner, tenant
			if c.Version > 0 { // as exported: the same version
				err = app.ImportWorkflow(ctx, w)
			} else {
				err = app.StoreWorkflow(ctx, w)
			}
		}
		if err != nil {
			env.errorf("%v", err)
			if errors.Is(err, store.ErrWorkflowVersion) {
				fmt.Fprintf(env.stderr, "hint: import keeps the version a file gives; leave out %s's version: to import it as the next one\n", name)
			}
			failed = true
			continue
		}
		fmt.Fprintf(env.stderr, "orchestra: imported workflow %s as version %d\n", w.Name, w.Version)
	}
	if failed {
		return ExitFailed
	}
	return ExitOK
}

// allWorkflows returns the configured workflows and the newest versions of
// the stored ones scope sees, sorted by name (then tenant and owner).
func allWorkflows(ctx context.Context, cfg *config.Config, st *store.Store, scope store.Scope) ([]*workflows.Workflow, error) {
	stored, err := st.Workflows(ctx, scope)
	if err != nil {
		return nil, err
	}
	var out []*workflows.Workflow
	for _, name := range slices.Sorted(maps.Keys(cfg.Workflows)) {
		w, err := workflows.FromConfig(name, cfg.Workflows[name])
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	for _, sw := range stored {
		w, err := workflows.FromStore(sw)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	slices.SortStableFunc(out, func(a, b *workflows.Workflow) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func listWorkflows(ctx context.Context, env *cliEnv, cfg *config.Config, st *store.Store, asJSON bool) int {
	all, err := allWorkflows(ctx, cfg, st, store.Scope{})
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	type row struct {
		Name        string   `json:"name"`
		Version     int      `json:"version"`
		Source      string   `json:"source"`
		Owner       string   `json:"owner,omitempty"`
		Tenant      string   `json:"tenant,omitempty"`
		Tenants     []string `json:"tenants,omitempty"`
		Parameters  []string `json:"parameters"`
		Description string   `json:"description"`
	}
	rows := []row{}
	for _, w := range all {
		r := row{Name: w.Name, Version: w.Version, Source: "store", Owner: w.Owner, Tenant: w.Tenant, Tenants: w.Tenants,
			Parameters: slices.Sorted(maps.Keys(w.Parameters.Properties)), Description: w.Description}
		if r.Parameters == nil {
			r.Parameters = []string{}
		}
		if w.Configured {
			r.Source = "config"
		}
		rows = append(rows, r)
	}
	if asJSON {
		writeJSON(env.stdout, rows)
		return ExitOK
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.stderr, "orchestra: no workflows in the configuration or in %s\n", cfg.Store.Path)
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tSOURCE\tOWNER\tTENANT\tPARAMETERS\tDESCRIPTION")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Version, r.Source, r.Owner, r.Tenant, strings.Join(r.Parameters, ", "), r.Description)
	}
	tw.Flush()
	return ExitOK
}

func showWorkflow(ctx context.Context, env *cliEnv, cfg *config.Config, st *store.Store, scope store.Scope, name string, version int) int {
	var w *workflows.Workflow
	var err error
	if c, ok := cfg.Workflows[name]; ok {
		w, err = workflows.FromConfig(name, c)
	} else {
		var sw *store.Workflow
		if sw, err = st.Workflow(ctx, scope, name, version); err == nil {
			w, err = workflows.FromStore(*sw)
			if err == nil {
				fmt.Fprintf(env.stderr, "orchestra: workflow %s version %d, saved %s%s\n", name, sw.Version,
					sw.CreatedAt.Local().Format(time.DateTime), savedFrom(sw.SavedFrom))
			}
		}
	}
	if err != nil {
		env.errorf("%v", err)
		fmt.Fprintln(env.stderr, "hint: run `orchestra workflows list` to see the workflows")
		return ExitFailed
	}
	return writeWorkflows(env, []*workflows.Workflow{w})
}

func savedFrom(execID string) string {
	if execID == "" {
		return ""
	}
	return " from run " + execID
}

func exportWorkflows(ctx context.Context, env *cliEnv, cfg *config.Config, st *store.Store, scope store.Scope, names []string) int {
	list, err := allWorkflows(ctx, cfg, st, scope)
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	all := map[string]*workflows.Workflow{}
	for _, w := range slices.Backward(list) { // a configured one before a stored one of its name
		all[w.Name] = w
	}
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(all))
	}
	var ws []*workflows.Workflow
	for _, n := range names {
		w, ok := all[n]
		if !ok {
			env.errorf("no workflow %s", strconv.Quote(n))
			fmt.Fprintln(env.stderr, "hint: run `orchestra workflows list` to see the workflows")
			return ExitFailed
		}
		ws = append(ws, w)
	}
	return writeWorkflows(env, ws)
}

// writeWorkflows writes ws as a workflows block of YAML, which import
// reads and the configuration file takes.
func writeWorkflows(env *cliEnv, ws []*workflows.Workflow) int {
	out := exported{Workflows: map[string]workflows.Config{}}
	for _, w := range ws {
		c, err := w.Config()
		if err != nil {
			env.errorf("%v", err)
			return ExitFailed
		}
		out.Workflows[w.Name] = c
	}
	data, err := yaml.Marshal(out)
	if err != nil {
		env.errorf("encoding the workflows: %v", err)
		return ExitFailed
	}
	env.stdout.Write(data)
	return ExitOK
}
