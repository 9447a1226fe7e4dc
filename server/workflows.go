package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
	"github.com/orchestra-mcp/orchestra/workflows"
)

// Workflows. The configured ones and the store's are each the catalog tool
// workflow__<name> (package workflows), listed to the callers who may see
// them: a configured one to every caller or to its tenants, a stored one to
// the caller who saved it, within its tenant (the machine's own callers are
// one such caller). Stored names are per owner and tenant: two callers may
// each keep a workflow of one name, and each sees and calls its own. The
// catalog holds one tool per name; a stored name's catalog tool is
// neutral (it says nothing of anyone's workflow), and each caller's view
// (workflowView) puts its own definition in its place, in tools/list, in
// its plans' checks and in its planner's prompt. A call runs the newest
// version its caller sees.

// startupRead bounds the read of the stored workflows at start-up.
const startupRead = 10 * time.Second

// workflowKey names a stored workflow: its owner, tenant and name.
type workflowKey struct{ owner, tenant, name string }

// workflowSet is the newest version of every workflow: the configured ones
// by name, the stored ones by owner, tenant and name.
type workflowSet struct {
	mu         sync.Mutex
	configured map[string]*workflows.Workflow
	stored     map[workflowKey]*workflows.Workflow
	// unfit remembers the last check that failed per workflow, so that a
	// catalog change logs a workflow that does not fit once.
	unfit map[*workflows.Workflow]string
}

// visible returns the workflow name the caller user (in tenant) sees: a
// configured one it may see, else its own stored one; nil if none.
func (s *workflowSet) visible(user, tenant, name string) *workflows.Workflow {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.configured[name]; w != nil && workflowVisible(w, user, tenant) {
		return w
	}
	return s.stored[workflowKey{user, tenant, name}]
}

// all returns every workflow the set holds.
func (s *workflowSet) all() []*workflows.Workflow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(slices.Collect(maps.Values(s.configured)), slices.Collect(maps.Values(s.stored))...)
}

// addWorkflows adds the configured workflows and the store's to the
// catalog. A stored workflow whose name a configured one its owner sees
// took is left out, with a warning.
func (a *App) addWorkflows(ctx context.Context) error {
	a.workflows = &workflowSet{configured: map[string]*workflows.Workflow{}, stored: map[workflowKey]*workflows.Workflow{}, unfit: map[*workflows.Workflow]string{}}
	for _, name := range slices.Sorted(maps.Keys(a.Config.Workflows)) {
		w, err := workflows.FromConfig(name, a.Config.Workflows[name])
		if err != nil {
			return err
		}
		a.workflows.configured[name] = w
	}
	// Read whatever ctx's fate: a server told to stop as it starts still
	// starts whole, then stops.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startupRead)
	defer cancel()
	stored, err := a.loadStored(rctx)
	if err != nil {
		return err
	}
	a.workflows.stored = stored
	return a.Catalog.Add(a.workflowTools()...)
}

// loadStored reads the newest version of every stored workflow. One whose
// name a configured one its owner sees took is left out, with a warning.
func (a *App) loadStored(ctx context.Context) (map[workflowKey]*workflows.Workflow, error) {
	rows, err := a.store.Workflows(ctx, store.Scope{})
	if err != nil {
		return nil, fmt.Errorf("loading workflows: %w", err)
	}
	out := map[workflowKey]*workflows.Workflow{}
	for _, sw := range rows {
		if c := a.workflows.configured[sw.Name]; c != nil && workflowVisible(c, sw.Owner, sw.Tenant) {
			a.log.Warn("a stored workflow has the name of a configured one its owner sees; the configured one is used", "workflow", sw.Name, "version", sw.Version)
			continue
		}
		w, err := workflows.FromStore(sw)
		if err != nil {
			a.log.Warn("a stored workflow does not load", "workflow", sw.Name, "version", sw.Version, "err", err)
			continue
		}
		out[workflowKey{sw.Owner, sw.Tenant, sw.Name}] = w
	}
	return out, nil
}

// DefaultWorkflowPoll is how often a server reads the stored workflows
// again (Options.WorkflowPoll).
const DefaultWorkflowPoll = 5 * time.Second

// pollWorkflows reads the stored workflows every interval until ctx ends,
// so that a save or a delete made by another process on the same store
// (the command line, another replica) reaches this server's clients: its
// catalog changes and they get notifications/tools/list_changed.
func (a *App) pollWorkflows(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.reloadWorkflows(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("reading the stored workflows again failed; the ones read before stay", "err", err)
		}
	}
}

// reloadWorkflows reads the stored workflows and, when their names or
// versions differ from those the server lists, lists the new ones.
func (a *App) reloadWorkflows(ctx context.Context) error {
	stored, err := a.loadStored(ctx)
	if err != nil {
		return err
	}
	a.workflows.mu.Lock()
	same := len(stored) == len(a.workflows.stored)
	for k, w := range stored {
		if old := a.workflows.stored[k]; old == nil || old.Version != w.Version {
			same = false
		}
	}
	if !same {
		a.workflows.stored = stored
		clear(a.workflows.unfit)
	}
	a.workflows.mu.Unlock()
	if same {
		return nil
	}
	if err := a.Catalog.ReplaceSource(workflows.Source, a.workflowTools()); err != nil {
		return fmt.Errorf("listing the stored workflows: %w", err)
	}
	return nil
}

// workflowTools returns the catalog's tools of the workflows: a configured
// one's own, and for a name only stored workflows have, a neutral tool
// (workflows.SharedTool) that each caller's view replaces with its own.
func (a *App) workflowTools() []registry.Tool {
	a.workflows.mu.Lock()
	defer a.workflows.mu.Unlock()
	opts := a.workflowToolOptions()
	names := map[string]bool{}
	for k := range a.workflows.stored {
		names[k.name] = true
	}
	for name := range a.workflows.configured {
		names[name] = true
	}
	tools := make([]registry.Tool, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if w := a.workflows.configured[name]; w != nil && len(w.Tenants) == 0 {
			tools = append(tools, workflows.Tool(w, opts))
			continue
		}
		tools = append(tools, workflows.SharedTool(name, opts))
	}
	return tools
}

func (a *App) workflowToolOptions() workflows.ToolOptions {
	return workflows.ToolOptions{Engine: a.Engine, Resolve: a.resolveWorkflow}
}

// workflowView returns the caller user's (in tenant) own definition of the
// workflows' tools, for orchestrate.RunOptions.ToolFor; nil when no
// workflow is scoped.
func (a *App) workflowView(user, tenant string) func(string) (registry.Tool, bool) {
	if !a.workflows.scoped() {
		return nil
	}
	opts := a.workflowToolOptions()
	return func(name string) (registry.Tool, bool) {
		wname, ok := strings.CutPrefix(name, workflows.Prefix)
		if !ok {
			return registry.Tool{}, false
		}
		w := a.workflows.visible(user, tenant, wname)
		if w == nil {
			return registry.Tool{}, false
		}
		return workflows.Tool(w, opts), true
	}
}

// checkWorkflows checks every workflow against the catalog as it is now
// and logs those that do not fit (once per problem): at start-up, and
// whenever the catalog changes (a downstream server connected, or its tools
// changed). A call of one fails before anything runs, saying why.
func (a *App) checkWorkflows() {
	for _, w := range a.workflows.all() {
		msg := ""
		if err := w.Check(a.Engine); err != nil {
			msg = err.Error()
		}
		a.workflows.mu.Lock()
		changed := a.workflows.unfit[w] != msg
		a.workflows.unfit[w] = msg
		a.workflows.mu.Unlock()
		if changed && msg != "" {
			a.log.Warn("a workflow does not fit the tools it calls", "workflow", w.Name, "version", w.Version, "err", msg)
		}
	}
}

// resolveWorkflow returns the newest version of the workflow name the
// caller of ctx sees: a configured one, or its own in the store.
func (a *App) resolveWorkflow(ctx context.Context, name string) (*workflows.Workflow, error) {
	ids, _ := toolcontext.IDsFrom(ctx)
	a.workflows.mu.Lock()
	c := a.workflows.configured[name]
	a.workflows.mu.Unlock()
	if c != nil && workflowVisible(c, ids.Owner, ids.Tenant) {
		return c, nil
	}
	sw, err := a.store.Workflow(ctx, store.OwnerScope(ids.Owner).InTenant(ids.Tenant), name, 0)
	if errors.Is(err, store.ErrWorkflowNotFound) {
		return nil, fmt.Errorf("unknown tool %q", workflows.ToolName(name))
	}
	if err != nil {
		return nil, err
	}
	return workflows.FromStore(*sw)
}

// workflowVisible reports whether the caller user (in tenant) sees w: a
// configured one without tenants every caller (and the machine's own
// callers, no user, every configured one); a stored one its owner in its
// tenant.
func workflowVisible(w *workflows.Workflow, user, tenant string) bool {
	if w.Configured {
		return user == "" || len(w.Tenants) == 0 || slices.Contains(w.Tenants, tenant)
	}
	return w.Owner == user && w.Tenant == tenant
}

// seesTool returns whether the caller user (in tenant) may see the tool
// name: every tool but the workflows it does not see.
func (a *App) seesTool(user, tenant string) func(string) bool {
	return func(name string) bool {
		wname, ok := strings.CutPrefix(name, workflows.Prefix)
		return !ok || a.workflows.visible(user, tenant, wname) != nil
	}
}

// callerIdentity returns the authenticated user and tenant of extra, ""
// for the machine's own callers (and a token that names no user).
func callerIdentity(extra *mcp.RequestExtra) (user, tenant string) {
	if extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
		return "", ""
	}
	return extra.TokenInfo.UserID, tenancy.Of(extra.TokenInfo)
}

// SaveWorkflow keeps plan, run with bindings, as the workflow sa names,
// of the caller user in tenant: its parameters are inferred
// (workflows.Infer) and it is stored (StoreWorkflow). savedFrom is the
// run's exec id.
func (a *App) SaveWorkflow(ctx context.Context, user, tenant string, sa orchestrate.SaveAs, plan *orchestrate.Plan, bindings map[string]any, savedFrom string) (*workflows.Workflow, error) {
	if plan == nil || len(plan.Steps) == 0 {
		return nil, errors.New("the run's plan has no steps to keep")
	}
	w, err := workflows.Infer(sa.Name, sa.Description, plan, bindings, a.Engine.Tools())
	if err != nil {
		return nil, err
	}
	w.Owner, w.Tenant, w.SavedFrom = user, tenant, savedFrom
	return w, a.StoreWorkflow(ctx, w)
}

// StoreWorkflow stores w as the next version of its name for its owner
// and tenant, once it is checked against the tools they may call; sets
// its version, and adds its tool to the catalog or replaces it (clients
// get notifications/tools/list_changed).
func (a *App) StoreWorkflow(ctx context.Context, w *workflows.Workflow) error {
	return a.storeWorkflow(ctx, w, false)
}

// ImportWorkflow stores w as StoreWorkflow does, keeping its version: an
// exported workflow comes back as the version it was, or not at all when
// its owner has that version or a newer one (store.ErrWorkflowVersion).
func (a *App) ImportWorkflow(ctx context.Context, w *workflows.Workflow) error {
	return a.storeWorkflow(ctx, w, true)
}

func (a *App) storeWorkflow(ctx context.Context, w *workflows.Workflow, keepVersion bool) error {
	if prev := a.workflows.visible(w.Owner, w.Tenant, w.Name); prev != nil && prev.Configured {
		return fmt.Errorf("workflow %q is configured; choose another name", w.Name)
	}
	w.Configured, w.Tenants = false, nil
	if err := w.Check(a.Engine.With(orchestrate.RunOptions{AllowTool: a.allowFor(w.Owner, w.Tenant), ToolFor: a.workflowView(w.Owner, w.Tenant)})); err != nil {
		return err
	}
	row, err := w.Stored()
	if err != nil {
		return err
	}
	if keepVersion {
		row.Version = w.Version
	}
	if w.Version, err = a.store.SaveWorkflow(ctx, row); err != nil {
		return err
	}
	a.workflows.mu.Lock()
	a.workflows.stored[workflowKey{w.Owner, w.Tenant, w.Name}] = w
	a.workflows.mu.Unlock()
	if err := a.Catalog.ReplaceSource(workflows.Source, a.workflowTools()); err != nil {
		return fmt.Errorf("listing workflow %s: %w", w.Name, err)
	}
	return nil
}

// DeleteWorkflow deletes every version of the stored workflow name that the
// caller user (in tenant) sees, and its tool (clients get
// notifications/tools/list_changed).
func (a *App) DeleteWorkflow(ctx context.Context, user, tenant, name string) (int, error) {
	n, err := a.store.DeleteWorkflow(ctx, store.OwnerScope(user).InTenant(tenant), name)
	if err != nil {
		return 0, err
	}
	key := workflowKey{user, tenant, name}
	a.workflows.mu.Lock()
	delete(a.workflows.unfit, a.workflows.stored[key])
	delete(a.workflows.stored, key)
	a.workflows.mu.Unlock()
	if err := a.Catalog.ReplaceSource(workflows.Source, a.workflowTools()); err != nil {
		return n, fmt.Errorf("unlisting workflow %s: %w", name, err)
	}
	return n, nil
}

// finishRun keeps a successful run's plan as the workflow its request's
// save_as names, and says so in the envelope's _metadata.workflow; a save
// that fails is a warning of the envelope, and the run's result stands.
func (a *App) finishRun(ctx context.Context, r *orchestrate.Request, env *orchestrate.Envelope) {
	if r.SaveAs == nil || env.Artifact == nil {
		return
	}
	warn := func(msg string) {
		env.Artifact.Warnings = append(env.Artifact.Warnings, &orchestrate.Issue{Path: "save_as", Code: orchestrate.CodeWorkflowNotSaved, Message: msg})
	}
	if !env.Artifact.Success || env.Artifact.DryRun {
		warn("only a run that succeeded is kept as a workflow; fix the run and send save_as again")
		return
	}
	ids, _ := toolcontext.IDsFrom(ctx)
	w, err := a.SaveWorkflow(ctx, ids.Owner, ids.Tenant, *r.SaveAs, env.Artifact.Plan, r.Bindings, env.Metadata.ExecID)
	if err != nil {
		warn(err.Error())
		return
	}
	env.Metadata.Workflow = &orchestrate.SavedWorkflow{Name: w.Name, Version: w.Version, Tool: workflows.ToolName(w.Name)}
}

// scoped reports whether some workflow is not visible to every caller: a
// stored one, or a configured one kept to some tenants.
func (s *workflowSet) scoped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stored) > 0 {
		return true
	}
	return slices.ContainsFunc(slices.Collect(maps.Values(s.configured)), func(w *workflows.Workflow) bool { return len(w.Tenants) > 0 })
}
