package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// agentCallerKey carries the MCP tool call a request's agents run under:
// its session is where their model calls go when no model is configured.
type agentCallerKey struct{}

// withAgentCaller returns ctx carrying the tool call req.
func withAgentCaller(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil {
		return ctx
	}
	return context.WithValue(ctx, agentCallerKey{}, req)
}

// agentCaller returns the tool call ctx runs under, or nil (the CLI).
func agentCaller(ctx context.Context) *mcp.CallToolRequest {
	req, _ := ctx.Value(agentCallerKey{}).(*mcp.CallToolRequest)
	return req
}

// callerTenant returns the tenant of the caller in ctx: the one its ids
// carry (agent_orchestrate sets it), else the one its credential names (a
// direct call of an exposed agent).
func callerTenant(ctx context.Context) string {
	if ids, _ := toolcontext.IDsFrom(ctx); ids.Tenant != "" {
		return ids.Tenant
	}
	if req := agentCaller(ctx); req != nil && req.Extra != nil {
		return tenancy.Of(req.Extra.TokenInfo)
	}
	return ""
}

// agentModel is the model of an agent that configures none, for the
// caller in ctx: the planner model of its tenant when the tenant
// configures one, else the planner's, else the calling client's own model
// through MCP sampling. On protocol 2026-07-28 a tool call samples only
// through input requests, which an agent's loop cannot wait for (its tool
// calls would run again at each round): that is refused, never left to
// hang.
func (a *App) agentModel(ctx context.Context) (llm.Model, error) {
	model := a.planner.model
	if tp, ok := a.tenantPlanners[callerTenant(ctx)]; ok {
		model = tp.model // the tenant's own, or the planner's
	}
	if model != nil {
		return model, nil
	}
	req := agentCaller(ctx)
	if req == nil {
		return nil, errors.New("no planner model is configured, and no MCP client is calling whose model could be sampled")
	}
	m, err := llm.SamplingFor(req, a.planner.key, a.planner.sampling)
	if err != nil {
		if errors.Is(err, llm.ErrUnavailable) {
			return nil, errors.New("no planner model is configured, and the calling client does not support sampling")
		}
		return nil, err
	}
	if _, ok := m.(*llm.InputSampling); ok {
		return nil, fmt.Errorf("no planner model is configured, and on protocol %s the calling client's model is sampled only through input requests, which an agent's tool loop cannot use", req.ProtocolVersion())
	}
	return m, nil
}
