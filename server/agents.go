package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// addAgents adds the configured agents to the catalog, each the tool
// agent__<name>; the model of one that configures none is found at each
// call (agentModel).
func (a *App) addAgents() error {
	if len(a.Config.Agents) == 0 {
		return nil
	}
	if err := a.checkAgentTools(); err != nil {
		return err
	}
	orch := a.orchestrateTool()
	as, err := agents.New(a.Config.Agents, agents.Options{
		Engine:      a.Engine,
		Catalog:     a.Catalog,
		Model:       a.planner.model,
		ModelFor:    a.agentModel,
		Orchestrate: &orch,
		Scope:       a.agentScope,
		Profile:     a.agentProfile,
		Prices:      a.Config.Pricing,
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

// checkAgentTools refuses, at start-up, an agent whose tools globs can
// match no tool: none of the catalog's (built-in tools, other agents,
// agent_orchestrate), none a configured downstream server could list (its
// tools are <server>__<tool>), none of client_final_tools. Downstream
// servers connect later, so what they list is not known yet: a glob
// counts when its literal start fits a configured server's prefix. A
// glob that matches nothing while the agent's others match is logged, not
// refused: it may name the client's tools of a request.
func (a *App) checkAgentTools() error {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(a.Config.Agents)) {
		globs := a.Config.Agents[name].Tools
		var none []string
		for _, g := range globs {
			if !a.globCanMatch(g) {
				none = append(none, strconv.Quote(g))
			}
		}
		switch {
		case len(none) == 0:
		case len(none) == len(globs):
			problems = append(problems, fmt.Sprintf("agent %s: agents.%s.tools (%s) match no tool: no built-in tool, agent or client_final_tools entry has such a name, and no mcpServers entry could list one (a server's tools are <server>__<tool>, e.g. \"fs__read_*\"); fix the globs, add the server to mcpServers, or remove agents.%s.tools for an agent without tools",
				name, name, strings.Join(none, ", "), name))
		default:
			a.log.Warn("an agent's tools glob matches no tool yet; it may name a client's tools", "agent", name, "globs", strings.Join(none, ", "))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// globCanMatch reports whether the tools glob g matches, or could once
// downstream servers (the configuration's and the tenants' own) list their
// tools, a tool an agent may call.
func (a *App) globCanMatch(g string) bool {
	match := func(name string) bool { ok, _ := path.Match(g, name); return ok }
	for _, t := range a.Catalog.List() {
		if match(t.Name) {
			return true
		}
	}
	if match(orchestrate.ToolName) {
		return true
	}
	for name := range a.Config.Agents {
		if match(agents.ToolName(name)) {
			return true
		}
	}
	for _, cf := range a.Config.ClientFinalTools {
		if ok, _ := path.Match(cf, g); ok || match(cf) { // "editor_*" and "editor_apply", either way
			return true
		}
	}
	literal := g
	if i := strings.IndexAny(g, `*?[\`); i >= 0 {
		literal = g[:i]
	}
	servers := slices.Collect(maps.Keys(a.Config.MCPServers))
	for _, t := range a.Config.Tenants { // a tenant's own: its callers' agents call them
		servers = slices.AppendSeq(servers, maps.Keys(t.MCPServers))
	}
	for _, name := range servers {
		prefix := name + "__"
		if strings.HasPrefix(literal, prefix) || (strings.HasPrefix(prefix, literal) && literal != g) {
			return true
		}
	}
	return false
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
				Prompt: func(ctx context.Context, _ *orchestrate.Engine, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
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
// tenant's tools, under its limits (and never agent_orchestrate). A
// caller in no tenant is kept from the tenants' own servers, when some
// tenant has any (its agents are then scoped too, without
// agent_orchestrate).
func (a *App) agentScope(ctx context.Context) (orchestrate.RunOptions, bool) {
	tenant := callerTenant(ctx)
	t, ok := a.Config.Tenants[tenant]
	if !ok {
		if allow := a.tenancy.Filter(""); allow != nil {
			return orchestrate.RunOptions{AllowTool: allow}, true
		}
		return orchestrate.RunOptions{}, false
	}
	lim := t.Limits.Limits
	return orchestrate.RunOptions{AllowTool: a.tenancy.Filter(tenant), Limits: &lim}, true
}

// agentProfile is what the caller in ctx adds to an agent's run: the
// layers of instructions (its request's, when a plan of the prompt path
// runs the agent; else the configured ones of its tenant) and its
// tenant's max_tool_steps.
func (a *App) agentProfile(ctx context.Context) agents.Profile {
	var p agents.Profile
	t := a.Config.Tenants[callerTenant(ctx)]
	if in, ok := orchestrate.InstructionsFrom(ctx); ok {
		p.Instructions = in
	} else {
		if a.Config.Planner != nil {
			p.Instructions.Operator = a.Config.Planner.Instructions
		}
		p.Instructions.Tenant = t.Instructions
	}
	p.MaxToolSteps = t.Limits.MaxToolSteps
	return p
}
