package server

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
)

// Tenants' own servers. A tenant's mcpServers are downstream servers whose
// tools only its callers list, plan with and call (tenancy.Table.Filter):
// they join the one catalog under their own names, which the
// configuration keeps unique, and every other caller's view, plan and call
// leaves them out. They start when a caller of the tenant first lists or
// calls tools, and run under the tenant's limits like its other tools.

// tenantServers are one tenant's own servers.
type tenantServers struct {
	m     *mcpserver.Manager
	once  sync.Once
	ready chan struct{} // closed once every server has started or failed once
}

// prepareTenantServers makes the managers of the tenants' own servers,
// started by ensureTenantServers.
func (a *App) prepareTenantServers(version string) {
	for _, name := range slices.Sorted(maps.Keys(a.Config.Tenants)) {
		servers := a.Config.Tenants[name].MCPServers
		if len(servers) == 0 {
			continue
		}
		m := mcpserver.NewManager(servers, a.Catalog, a.downstreamOptions(version, a.log.With("tenant", name)))
		a.closers = append(a.closers, m.Close)
		if a.tenantServers == nil {
			a.tenantServers = map[string]*tenantServers{}
		}
		a.tenantServers[name] = &tenantServers{m: m, ready: make(chan struct{})}
	}
}

// ensureTenantServers starts the own servers of tenant, if it has any and
// they have not started, and waits until each has started or failed once
// (or ctx ends).
func (a *App) ensureTenantServers(ctx context.Context, tenant string) {
	ts, ok := a.tenantServers[tenant]
	if !ok {
		return
	}
	ts.once.Do(func() {
		// The start outlives the call that asked for it: it ends when
		// every server has started or failed once (each within the
		// connect timeout), or when the app drains.
		go func() {
			defer close(ts.ready)
			ts.m.Start(a.drain)
		}()
	})
	select {
	case <-ts.ready:
	case <-ctx.Done():
	}
}

// TenantDownstream returns the state of tenant's own servers; nil when it
// has none.
func (a *App) TenantDownstream(tenant string) []mcpserver.ServerStatus {
	ts, ok := a.tenantServers[tenant]
	if !ok {
		return nil
	}
	return ts.m.Status()
}
