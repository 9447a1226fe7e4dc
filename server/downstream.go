package server

import (
	"context"

	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
)

// startDownstream connects the downstream MCP servers of the configuration
// and keeps their tools in the catalog. It returns once every server has
// started or failed once; failed servers are retried in the background.
func (a *App) startDownstream(ctx context.Context, version string) {
	if len(a.Config.MCPServers) == 0 {
		return
	}
	a.downstream = mcpserver.NewManager(a.Config.MCPServers, a.Catalog, mcpserver.Options{
		Logger:        a.log,
		ClientName:    "orchestra",
		ClientVersion: version,
		// A downstream result may be up to this large as JSON.
		MaxResponseBytes: a.Config.Limits.MaxDownstreamResponseBytes,
		// An orchestra listed as its own downstream server stops here.
		MaxDepth: a.Config.Limits.MaxDepth,
	})
	a.downstream.Start(ctx)
	a.closers = append(a.closers, a.downstream.Close)
	for _, st := range a.downstream.Status() {
		if st.Error != "" {
			a.log.Warn("downstream server not ready", "server", st.Name, "state", st.State, "err", st.Error)
		} else {
			a.log.Debug("downstream server", "server", st.Name, "state", st.State, "tools", len(st.Tools))
		}
	}
}

// Downstream returns the state of every configured downstream server.
func (a *App) Downstream() []mcpserver.ServerStatus {
	if a.downstream == nil {
		return nil
	}
	return a.downstream.Status()
}
