package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
)

// tenantPlanner is the planner of a tenant's prompts: offered only the
// tenant's tools, asking the tenant's model when it has one (the global
// model, or the client's through sampling, otherwise).
type tenantPlanner struct {
	base  *planner.Planner
	model llm.Model
}

// newTenantPlanners builds the planner of every tenant.
func newTenantPlanners(cfg *config.Config, cat *registry.Catalog, engine *orchestrate.Engine, forbidden func(string) bool, global *plannerSetup, log *slog.Logger) (map[string]*tenantPlanner, error) {
	out := map[string]*tenantPlanner{}
	for name, t := range cfg.Tenants {
		tp := &tenantPlanner{model: global.model}
		if pc := t.Planner; pc != nil && pc.Provider != llm.ProviderSampling {
			m, err := llm.New(*pc, llm.Options{Logger: log})
			if err != nil {
				return nil, fmt.Errorf("tenants.%s.planner: %w", name, err)
			}
			tp.model = m
		}
		t := t
		opts := global.options // the planner block's fallback, context budget and lessons
		opts.Catalog, opts.Engine, opts.Model = cat, engine, tp.model
		opts.Forbidden = func(n string) bool { return forbidden(n) || !tenancy.AllowsTool(t, n) }
		opts.Attempts, opts.MaxToolSteps, opts.Logger = cfg.Limits.PlannerAttempts, cfg.Limits.MaxToolSteps, log.With("tenant", name)
		tp.base = planner.New(opts)
		out[name] = tp
	}
	return out, nil
}

// plannerFor returns the planner and model of req's caller: its tenant's,
// or the global ones.
func (a *App) plannerFor(req *mcp.CallToolRequest) (*planner.Planner, llm.Model) {
	if req != nil && req.Extra != nil {
		if tp, ok := a.tenantPlanners[tenancy.Of(req.Extra.TokenInfo)]; ok {
			return tp.base, tp.model
		}
	}
	return a.planner.base, a.planner.model
}

// planningDisabled answers a prompt from a tenant whose planning_enabled
// is false.
func planningDisabled(ctx context.Context, e *orchestrate.Engine) *mcp.CallToolResult {
	return orchestrate.Result(e.Reject(ctx, []*orchestrate.Issue{{
		Code:    orchestrate.CodePlanningDisabled,
		Message: "planning is disabled for your tenant (planning_enabled: false): send a plan instead of a prompt",
	}}))
}
