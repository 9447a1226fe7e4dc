package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Tenants. server.auth recognises a caller (a token's name, a JWT's
// claims); the tenants block maps callers to a tenant, whose name goes
// into the token info's Extra under tenancy.Key. A tenant's caller lists
// and calls only its tools, its plans are validated against them, its
// runs obey its limits, and it reads only its own runs.

// tenant returns the configuration of the caller's tenant, if it has one.
func (a *App) tenant(ti *auth.TokenInfo) (string, config.Tenant, bool) {
	name := tenancy.Of(ti)
	if name == "" {
		return "", config.Tenant{}, false
	}
	t, ok := a.Config.Tenants[name]
	return name, t, ok
}

// withTenant scopes a request's runs to its caller's tenant: the tenant
// is recorded with the run's ids, the catalog narrowed to its tools and
// the limits lowered to its own.
func (a *App) withTenant(ctx context.Context, req *mcp.CallToolRequest, ro *orchestrate.RunOptions) (context.Context, config.Tenant, bool) {
	if req.Extra == nil {
		return ctx, config.Tenant{}, false
	}
	name, t, ok := a.tenant(req.Extra.TokenInfo)
	if !ok {
		return ctx, config.Tenant{}, false
	}
	ids, _ := toolcontext.IDsFrom(ctx)
	ids.Tenant = name
	ctx = toolcontext.WithIDs(ctx, ids)
	ro.AllowTool = func(tool string) bool { return tenancy.AllowsTool(t, tool) }
	lim := t.Limits.Limits
	ro.Limits = &lim
	return ctx, t, true
}

// tenantTools keeps a tenant's caller to its tools: tools/list shows only
// them (and agent_orchestrate), and a tools/call of another is refused as
// an unknown tool. With tenants, a tools/list answer depends on its
// caller: it is marked private, so that no intermediary serves one
// caller's list to another.
func (a *App) tenantTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		if method != "tools/list" && method != "tools/call" {
			return next(ctx, method, req)
		}
		if method == "tools/list" && len(a.Config.Tenants) > 0 {
			defer func() {
				if lr, ok := res.(*mcp.ListToolsResult); ok {
					lr.CacheScope = "private"
				}
			}()
		}
		extra := req.GetExtra()
		if extra == nil {
			return next(ctx, method, req)
		}
		_, t, ok := a.tenant(extra.TokenInfo)
		if !ok {
			return next(ctx, method, req)
		}
		if r, isCall := req.(*mcp.CallToolRequest); isCall && r.Params != nil {
			if r.Params.Name != orchestrate.ToolName && r.Params.Name != DiscoveryToolName && !tenancy.AllowsTool(t, r.Params.Name) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q; tools/list shows the tools you may call", r.Params.Name)}
			}
			return next(ctx, method, req)
		}
		res, err = next(ctx, method, req)
		if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
			a.scopeToolList(lr, t)
		}
		return res, err
	}
}

// scopeToolList narrows a tools/list result to tenant t's tools. Nothing in
// it names another tool: agent_orchestrate's description lists only the
// tenant's unlisted tools, and orchestra_tools, which describes those, is
// listed only when there are some.
func (a *App) scopeToolList(lr *mcp.ListToolsResult, t config.Tenant) {
	allow := func(name string) bool { return tenancy.AllowsTool(t, name) }
	unlisted := a.unlistedFor(allow)
	lr.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(tool *mcp.Tool) bool {
		switch tool.Name {
		case orchestrate.ToolName:
			return false
		case DiscoveryToolName:
			return len(unlisted) == 0
		}
		return !allow(tool.Name)
	})
	for i, tool := range lr.Tools {
		if tool.Name == orchestrate.ToolName {
			scoped := *tool // the server's own definition is shared: copy it
			scoped.Description = orchestrate.DescribeFor(unlisted, allow)
			lr.Tools[i] = &scoped
		}
	}
}

// unlistedFor returns the catalog's tools that allow accepts and tools/list
// does not show.
func (a *App) unlistedFor(allow func(string) bool) []registry.Tool {
	tools := a.Catalog.List()
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.DeleteFunc(tools, func(t registry.Tool) bool { return a.exposed[t.Name] || !allow(t.Name) })
}

// callerTools returns what the caller of extra may call: nil for every
// tool, or its tenant's filter.
func (a *App) callerTools(extra *mcp.RequestExtra) func(string) bool {
	if extra == nil {
		return nil
	}
	_, t, ok := a.tenant(extra.TokenInfo)
	if !ok {
		return nil
	}
	return func(name string) bool { return tenancy.AllowsTool(t, name) }
}
