package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/toolcontext"
	"github.com/orchestra-mcp/orchestra/workflows"
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

// withTenant scopes a request's runs to its caller: the tenant is
// recorded with the run's ids, the catalog narrowed to the tools the
// caller may call (its tenant's, and the workflows it sees; never another
// tenant's own servers) and the limits lowered to its tenant's own.
func (a *App) withTenant(ctx context.Context, req *mcp.CallToolRequest, ro *orchestrate.RunOptions) (context.Context, config.Tenant, bool) {
	if req.Extra == nil { // the machine's own caller (stdio, in memory)
		ro.AllowTool, ro.ToolFor = a.allowFor("", ""), a.workflowView("", "")
		return ctx, config.Tenant{}, false
	}
	user, _ := callerIdentity(req.Extra)
	name, t, ok := a.tenant(req.Extra.TokenInfo)
	if ok {
		ids, _ := toolcontext.IDsFrom(ctx)
		ids.Tenant = name
		ctx = toolcontext.WithIDs(ctx, ids)
	} else {
		name = ""
	}
	a.narrowTo(user, name, t, ro)
	return ctx, t, ok
}

// narrowTo narrows ro to what the caller user, in tenant name (t), may
// call and to its tenant's limits.
func (a *App) narrowTo(user, name string, t config.Tenant, ro *orchestrate.RunOptions) {
	ro.AllowTool = a.allowFor(user, name)
	ro.ToolFor = a.workflowView(user, name)
	if name != "" {
		lim := t.Limits.Limits
		ro.Limits = &lim
	}
}

// allowFor returns what the caller user, in tenant, may call: nil for
// every tool (the machine's own callers, and callers whom nothing
// narrows). Its tenant's tools and own servers (tenancy.Table.Filter),
// never another tenant's own servers; a workflow it sees it may call
// whatever its tenant's globs say (its steps are held to them); one it
// does not see it may not.
func (a *App) allowFor(user, tenant string) func(string) bool {
	base := a.tenancy.Filter(tenant)
	if base == nil && !a.workflows.scoped() {
		return nil
	}
	sees := a.seesTool(user, tenant)
	return func(name string) bool {
		if strings.HasPrefix(name, workflows.Prefix) {
			return sees(name)
		}
		return base == nil || base(name)
	}
}

// tenantTools keeps a caller to its tools (allowFor): tools/list shows
// only them (and agent_orchestrate), and a tools/call of another is
// refused as an unknown tool. A tenant's own servers start when its
// callers first list or call tools. With tenants or stored workflows, a
// tools/list answer depends on its caller: it is marked private, so that
// no intermediary serves one caller's list to another.
func (a *App) tenantTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		if method != "tools/list" && method != "tools/call" {
			return next(ctx, method, req)
		}
		if method == "tools/list" && (len(a.Config.Tenants) > 0 || a.workflows.scoped()) {
			defer func() {
				if lr, ok := res.(*mcp.ListToolsResult); ok {
					lr.CacheScope = "private"
				}
			}()
		}
		user, tenant := a.caller(req.GetExtra())
		a.ensureTenantServers(ctx, tenant)
		allow := a.allowFor(user, tenant)
		if allow == nil {
			return next(ctx, method, req)
		}
		if r, isCall := req.(*mcp.CallToolRequest); isCall && r.Params != nil {
			if r.Params.Name != orchestrate.ToolName && r.Params.Name != DiscoveryToolName && !allow(r.Params.Name) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q; tools/list shows the tools you may call", r.Params.Name)}
			}
			return next(ctx, method, req)
		}
		res, err = next(ctx, method, req)
		if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
			a.scopeToolList(lr, allow, a.workflowView(user, tenant))
		}
		return res, err
	}
}

// scopeToolList narrows a tools/list result to the tools allow accepts,
// each workflow's tool the caller's own (view, when set). Nothing in it
// names another tool: agent_orchestrate's description lists only the
// caller's unlisted tools, and orchestra_tools, which describes those, is
// listed only when there are some.
func (a *App) scopeToolList(lr *mcp.ListToolsResult, allow func(string) bool, view func(string) (registry.Tool, bool)) {
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
		if view != nil {
			if own, ok := view(tool.Name); ok {
				lr.Tools[i] = mcpTool(own)
			}
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

// caller returns the user and configured tenant of extra's caller; ""
// and "" for the machine's own callers.
func (a *App) caller(extra *mcp.RequestExtra) (user, tenant string) {
	if extra == nil {
		return "", ""
	}
	user, _ = callerIdentity(extra)
	tenant, _, _ = a.tenant(extra.TokenInfo)
	return user, tenant
}

// callerTools returns what the caller of extra may call: nil for every
// tool, or its filter (allowFor).
func (a *App) callerTools(extra *mcp.RequestExtra) func(string) bool {
	return a.allowFor(a.caller(extra))
}
