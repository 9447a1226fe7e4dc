package server

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
	"github.com/orchestra-mcp/orchestra/workflows"
)

// Tenants. server.auth recognises a caller (a token's name, a JWT's
// claims); the tenants block maps callers to a tenant, whose name goes
// into the token info's Extra under tenantKey. A tenant's caller lists
// and calls only its tools, its plans are validated against them, its
// runs obey its limits, and it reads only its own runs.

// tenantKey is the key of auth.TokenInfo.Extra that holds the caller's tenant.
const tenantKey = "orchestra/tenant"

// tenantTable recognises the tenants of callers.
type tenantTable struct {
	cfg     map[string]config.Tenant
	byToken map[string]string
	names   []string // sorted, for a deterministic claims match
}

func newTenantTable(cfg map[string]config.Tenant) *tenantTable {
	if len(cfg) == 0 {
		return nil
	}
	tt := &tenantTable{cfg: cfg, byToken: map[string]string{}, names: slices.Sorted(maps.Keys(cfg))}
	for _, name := range tt.names {
		for _, tok := range cfg[name].Match.Tokens {
			tt.byToken[tok] = name
		}
	}
	return tt
}

// forToken returns the tenant of a static token's holder; "" when none
// matches: such a token is the operator's, with the global catalog.
func (tt *tenantTable) forToken(name string) string { return tt.byToken[name] }

// forClaims returns the first tenant (by name) whose claims a JWT's all
// carry; a JWT caller must belong to a tenant when tenants are configured.
func (tt *tenantTable) forClaims(claims map[string]any) (string, bool) {
	for _, name := range tt.names {
		want := tt.cfg[name].Match.Claims
		if len(want) == 0 {
			continue
		}
		ok := true
		for k, v := range want {
			if !claimHas(claims[k], v) {
				ok = false
				break
			}
		}
		if ok {
			return name, true
		}
	}
	return "", false
}

// claimHas reports whether a claim equals want, or, as a list or a
// space-separated string of scopes, contains it.
func claimHas(claim any, want string) bool {
	switch c := claim.(type) {
	case string:
		return c == want || slices.Contains(strings.Fields(c), want)
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	case bool, float64:
		return fmt.Sprint(c) == want
	}
	return false
}

// tenantOf returns the tenant of an authenticated caller, "" for none.
func tenantOf(ti *auth.TokenInfo) string {
	if ti == nil {
		return ""
	}
	t, _ := ti.Extra[tenantKey].(string)
	return t
}

// CallerScope is whose records a reader sees: an authenticated HTTP caller
// sees the runs it started, within its tenant; a caller without a
// credential (stdio, or HTTP without authentication, which serves
// loopback only unless told otherwise) is the machine's own and sees every
// run, as the CLI does.
func CallerScope(extra *mcp.RequestExtra) store.Scope {
	if extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
		return store.Scope{}
	}
	return store.OwnerScope(extra.TokenInfo.UserID).InTenant(tenantOf(extra.TokenInfo))
}

// MaySee reports whether the caller of extra may read run.
func MaySee(extra *mcp.RequestExtra, run *store.Run) bool { return CallerScope(extra).SeesRun(run) }

// tenant returns the configuration of the caller's tenant, if it has one.
func (a *App) tenant(ti *auth.TokenInfo) (string, config.Tenant, bool) {
	name := tenantOf(ti)
	if name == "" {
		return "", config.Tenant{}, false
	}
	t, ok := a.Config.Tenants[name]
	return name, t, ok
}

// allowTool reports whether tenant t may call the tool name: it matches
// one of the tenant's globs, or comes from one of its servers. A tenant
// with neither may call every tool.
func allowTool(t config.Tenant, name string) bool {
	if len(t.Tools) == 0 && len(t.Servers) == 0 {
		return true
	}
	for _, g := range t.Tools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	for _, s := range t.Servers {
		if strings.HasPrefix(name, s+"__") {
			return true
		}
	}
	return false
}

// withTenant scopes a request's runs to its caller: the tenant is
// recorded with the run's ids, the catalog narrowed to the tools the
// caller may call (its tenant's, and the workflows it sees) and the limits
// lowered to its tenant's own.
func (a *App) withTenant(ctx context.Context, req *mcp.CallToolRequest, ro *orchestrate.RunOptions) (context.Context, config.Tenant, bool) {
	if req.Extra == nil {
		return ctx, config.Tenant{}, false
	}
	user, _ := callerIdentity(req.Extra)
	name, t, ok := a.tenant(req.Extra.TokenInfo)
	if ok {
		ids, _ := toolcontext.IDsFrom(ctx)
		ids.Tenant = name
		ctx = toolcontext.WithIDs(ctx, ids)
		lim := t.Limits.Limits
		ro.Limits = &lim
	}
	ro.AllowTool = a.allowFor(user, name)
	return ctx, t, ok
}

// allowFor returns what the caller user, in tenant, may call: nil for
// every tool (the machine's own callers, and callers whom nothing
// narrows). A workflow it sees it may call whatever its tenant's globs say
// (its steps are held to them); one it does not see it may not.
func (a *App) allowFor(user, tenant string) func(string) bool {
	t, inTenant := a.Config.Tenants[tenant]
	if user == "" || (!inTenant && !a.workflows.scoped()) {
		return nil
	}
	sees := a.seesTool(user, tenant)
	return func(name string) bool {
		if strings.HasPrefix(name, workflows.Prefix) {
			return sees(name)
		}
		return !inTenant || allowTool(t, name)
	}
}

// tenantTools keeps a caller to its tools (allowFor): tools/list shows
// only them (and agent_orchestrate), and a tools/call of another is
// refused as an unknown tool. With tenants or stored workflows, a
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
		allow := a.callerTools(req.GetExtra())
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
			a.scopeToolList(lr, allow)
		}
		return res, err
	}
}

// scopeToolList narrows a tools/list result to the tools allow accepts.
// Nothing in it names another tool: agent_orchestrate's description lists
// only the caller's unlisted tools, and orchestra_tools, which describes
// those, is listed only when there are some.
func (a *App) scopeToolList(lr *mcp.ListToolsResult, allow func(string) bool) {
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
// tool, or its filter (allowFor).
func (a *App) callerTools(extra *mcp.RequestExtra) func(string) bool {
	if extra == nil {
		return nil
	}
	user, _ := callerIdentity(extra)
	tenant, _, _ := a.tenant(extra.TokenInfo)
	return a.allowFor(user, tenant)
}
