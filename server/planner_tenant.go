package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/workflows"
)

// tenantPlanner is the planner of a tenant's prompts: offered only the
// tenant's tools, asking the tenant's model when it has one (the global
// model, or the client's through sampling, otherwise).
type tenantPlanner struct {
	base  *planner.Planner
	model llm.Model
}

// newTenantPlanners builds the planner of every tenant.
func newTenantPlanners(cfg *config.Config, tenants *tenancy.Table, cat *registry.Catalog, engine *orchestrate.Engine, forbidden func(string) bool, global *plannerSetup, log *slog.Logger) (map[string]*tenantPlanner, error) {
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
		allow := tenants.Filter(name)
		opts := global.options // the planner block's fallback, context budget, lessons, instructions and prices
		opts.Catalog, opts.Engine, opts.Model = cat, engine, tp.model
		// A workflow is offered to the callers who see it: the request's
		// budget narrows the planner to those (App.allowFor).
		opts.Forbidden = func(n string) bool {
			return forbidden(n) || (!strings.HasPrefix(n, workflows.Prefix) && allow != nil && !allow(n))
		}
		opts.Attempts, opts.MaxToolSteps, opts.Logger = cfg.Limits.PlannerAttempts, toolSteps(cfg.Limits.MaxToolSteps, t), log.With("tenant", name)
		opts.Instructions.Tenant = t.Instructions
		tp.base = planner.New(opts)
		out[name] = tp
	}
	return out, nil
}

// toolSteps is the max_tool_steps of tenant t's model loops: its own
// when it sets one (never above the global, which the configuration
// checks), else the global.
func toolSteps(global int, t config.Tenant) int {
	if n := t.Limits.MaxToolSteps; n > 0 && (global <= 0 || n < global) {
		return n
	}
	return global
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
