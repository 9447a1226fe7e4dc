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
// the caller who saved it (within its tenant) and to the machine's own
// callers, as records are. A call runs the newest version its caller sees.

// startupRead bounds the read of the stored workflows at start-up.
const startupRead = 10 * time.Second

// workflowSet is the newest version of every workflow, by name.
type workflowSet struct {
	mu     sync.Mutex
	byName map[string]*workflows.Workflow
	// unfit remembers the last check that failed per workflow, so that a
	// catalog change logs a workflow that does not fit once.
	unfit map[string]string
}

// addWorkflows adds the configured workflows and the store's to the
// catalog. A stored workflow whose name the configuration took is left
// out, with a warning.
func (a *App) addWorkflows(ctx context.Context) error {
	a.workflows = &workflowSet{byName: map[string]*workflows.Workflow{}, unfit: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(a.Config.Workflows)) {
		w, err := workflows.FromConfig(name, a.Config.Workflows[name])
		if err != nil {
			return err
		}
		a.workflows.byName[name] = w
	}
	// Read whatever ctx's fate: a server told to stop as it starts still
	// starts whole, then stops.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startupRead)
	defer cancel()
	stored, err := a.store.Workflows(rctx, store.Scope{})
	if err != nil {
		return fmt.Errorf("loading workflows: %w", err)
	}
	for _, sw := range stored {
		if _, taken := a.workflows.byName[sw.Name]; taken {
			a.log.Warn("a stored workflow has the name of a configured one; the configured one is used", "workflow", sw.Name, "version", sw.Version)
			continue
		}
		w, err := workflows.FromStore(sw)
		if err != nil {
			a.log.Warn("a stored workflow does not load", "workflow", sw.Name, "version", sw.Version, "err", err)
			continue
		}
		a.workflows.byName[sw.Name] = w
	}
	return a.Catalog.Add(a.workflowTools()...)
}

// workflowTools returns the tools of the workflows' newest versions.
func (a *App) workflowTools() []registry.Tool {
	a.workflows.mu.Lock()
	defer a.workflows.mu.Unlock()
	opts := workflows.ToolOptions{Engine: a.Engine, Resolve: a.resolveWorkflow}
	tools := make([]registry.Tool, 0, len(a.workflows.byName))
	for _, name := range slices.Sorted(maps.Keys(a.workflows.byName)) {
		tools = append(tools, workflows.Tool(a.workflows.byName[name], opts))
	}
	return tools
}

// checkWorkflows checks every workflow against the catalog as it is now
// and logs those that do not fit (once per problem): at start-up, and
// whenever the catalog changes (a downstream server connected, or its tools
// changed). A call of one fails before anything runs, saying why.
func (a *App) checkWorkflows() {
	a.workflows.mu.Lock()
	ws := slices.Collect(maps.Values(a.workflows.byName))
	a.workflows.mu.Unlock()
	for _, w := range ws {
		msg := ""
		if err := w.Check(a.Engine); err != nil {
			msg = err.Error()
		}
		a.workflows.mu.Lock()
		changed := a.workflows.unfit[w.Name] != msg
		a.workflows.unfit[w.Name] = msg
		a.workflows.mu.Unlock()
		if changed && msg != "" {
			a.log.Warn("a workflow does not fit the tools it calls", "workflow", w.Name, "version", w.Version, "err", msg)
		}
	}
}

// resolveWorkflow returns the newest version of the workflow name the
// caller of ctx sees: a configured one, or the store's.
func (a *App) resolveWorkflow(ctx context.Context, name string) (*workflows.Workflow, error) {
	ids, _ := toolcontext.IDsFrom(ctx)
	a.workflows.mu.Lock()
	w := a.workflows.byName[name]
	a.workflows.mu.Unlock()
	if w != nil && w.Configured {
		if !workflowVisible(w, ids.Owner, ids.Tenant) {
			return nil, fmt.Errorf("unknown tool %q", workflows.ToolName(name))
		}
		return w, nil
	}
	scope := store.Scope{}
	if ids.Owner != "" {
		scope = store.OwnerScope(ids.Owner).InTenant(ids.Tenant)
	}
	sw, err := a.store.Workflow(ctx, scope, name, 0)
	if errors.Is(err, store.ErrWorkflowNotFound) {
		return nil, fmt.Errorf("unknown tool %q", workflows.ToolName(name))
	}
	if err != nil {
		return nil, err
	}
	return workflows.FromStore(*sw)
}

// workflowVisible reports whether the caller user (in tenant) sees w; the
// machine's own callers (no user) see every workflow.
func workflowVisible(w *workflows.Workflow, user, tenant string) bool {
	if user == "" {
		return true
	}
	if w.Configured {
		return len(w.Tenants) == 0 || slices.Contains(w.Tenants, tenant)
	}
	return w.Owner == user && w.Tenant == tenant
}

// seesTool returns whether the caller user (in tenant) may see the tool
// name: every tool but the workflows it does not see.
func (a *App) seesTool(user, tenant string) func(string) bool {
	return func(name string) bool {
		wname, ok := strings.CutPrefix(name, workflows.Prefix)
		if !ok {
			return true
		}
		a.workflows.mu.Lock()
		w := a.workflows.byName[wname]
		a.workflows.mu.Unlock()
		return w != nil && workflowVisible(w, user, tenant)
	}
}

// callerIdentity returns the authenticated user and tenant of extra, ""
// for the machine's own callers.
func callerIdentity(extra *mcp.RequestExtra) (user, tenant string) {
	if extra == nil || extra.TokenInfo == nil {
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
	a.workflows.mu.Lock()
	prev := a.workflows.byName[w.Name]
	a.workflows.mu.Unlock()
	if prev != nil && prev.Configured {
		return fmt.Errorf("workflow %q is configured; choose another name", w.Name)
	}
	w.Configured, w.Tenants = false, nil
	if err := w.Check(a.Engine.With(orchestrate.RunOptions{AllowTool: a.allowFor(w.Owner, w.Tenant)})); err != nil {
		return err
	}
	row, err := w.Stored()
	if err != nil {
		return err
	}
	if w.Version, err = a.store.SaveWorkflow(ctx, row); err != nil {
		if errors.Is(err, store.ErrWorkflowTaken) {
			return fmt.Errorf("workflow name %q is taken; choose another name", w.Name)
		}
		return err
	}
	a.workflows.mu.Lock()
	a.workflows.byName[w.Name] = w
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
	scope := store.Scope{}
	if user != "" {
		scope = store.OwnerScope(user).InTenant(tenant)
	}
	n, err := a.store.DeleteWorkflow(ctx, scope, name)
	if err != nil {
		return 0, err
	}
	a.workflows.mu.Lock()
	if w := a.workflows.byName[name]; w != nil && !w.Configured {
		delete(a.workflows.byName, name)
		delete(a.workflows.unfit, name)
	}
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
	for _, w := range s.byName {
		if !w.Configured || len(w.Tenants) > 0 {
			return true
		}
	}
	return false
}
