package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
)

// addAgents adds the configured agents to the catalog, each the tool
// agent__<name>; the model of one that configures none is found at each
// call (agentModel).
func (a *App) addAgents() error {
	if len(a.Config.Agents) == 0 {
		return nil
	}
	orch := a.orchestrateTool()
	as, err := agents.New(a.Config.Agents, agents.Options{
		Engine:      a.Engine,
		Catalog:     a.Catalog,
		Model:       a.planner.model,
		ModelFor:    a.agentModel,
		Orchestrate: &orch,
		Scope:       a.agentScope,
		Elicit:      func(ctx context.Context) orchestrate.Elicit { return elicitFor(agentCaller(ctx)) },
		Logger:      a.log,
	})
	if err != nil {
		return err
	}
	a.agents = as
	tools := make([]registry.Tool, len(as))
	for i, ag := range as {
		tools[i] = ag.Tool()
	}
	return a.Catalog.Add(tools...)
}

// Agents returns the configured agents, sorted by name.
func (a *App) Agents() []*agents.Agent { return a.agents }

// exposedAgent reports whether t is an agent listed to clients.
func (a *App) exposedAgent(t registry.Tool) bool {
	for _, ag := range a.agents {
		if agents.ToolName(ag.Name) == t.Name {
			return ag.Config.Expose
		}
	}
	return false
}

// orchestrateTool is agent_orchestrate as an agent allowed it calls it: a
// nested orchestration at the agent's depth, so that limits.max_depth
// holds, recorded as a child of the agent's run.
func (a *App) orchestrateTool() registry.Tool {
	return registry.Tool{
		Name:        orchestrate.ToolName,
		Description: "Runs a whole multi-step tool plan in one call: {\"plan\": {\"steps\": [{\"id\": \"a\", \"tool\": \"...\", \"arguments\": {...}}]}}.",
		InputSchema: schemas.OrchestrateInput(),
		Source:      "orchestra",
		Call: func(ctx context.Context, cr *registry.CallRequest) (*registry.Result, error) {
			raw, err := json.Marshal(cr.Arguments)
			if err != nil {
				return nil, fmt.Errorf("encoding the arguments of %s: %w", orchestrate.ToolName, err)
			}
			h := a.Engine.Handler(orchestrate.HandlerOptions{
				MaxRequestBytes: int(a.Config.Server.MaxRequestBytes),
				Gate:            a.Config.Server.RequestGate(),
				Prompt: func(ctx context.Context, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
					p, err := a.Planner()
					if err != nil {
						return orchestrate.Result(a.Engine.RunPrompt(ctx, r, failPlanning(err)))
					}
					env, err := p.Run(ctx, r)
					if err != nil {
						return orchestrate.Result(a.Engine.RunPrompt(ctx, r, failPlanning(err)))
					}
					return orchestrate.Result(env)
				},
			})
			res, err := h(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: orchestrate.ToolName, Arguments: raw}})
			if err != nil {
				return nil, err
			}
			out := &registry.Result{Content: res.Content, IsError: res.IsError}
			if sc, ok := res.StructuredContent.(json.RawMessage); ok {
				var v any
				if err := json.Unmarshal(sc, &v); err == nil {
					out.Structured = v
				}
			}
			return out, nil
		},
	}
}

// agentScope narrows an agent's run to its caller's tenant: only the
// tenant's tools, under its limits (and never agent_orchestrate).
func (a *App) agentScope(ctx context.Context) (orchestrate.RunOptions, bool) {
	tenant := callerTenant(ctx)
	if tenant == "" {
		return orchestrate.RunOptions{}, false
	}
	t := a.Config.Tenants[tenant]
	lim := t.Limits.Limits
	return orchestrate.RunOptions{AllowTool: func(name string) bool { return tenancy.AllowsTool(t, name) }, Limits: &lim}, true
}
