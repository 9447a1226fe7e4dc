package planner

import (
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// toolFor returns the planning tool for req: the catalog's, with the tools
// the request declares in client_tools added (they are offered like any
// tool; a plan that calls one pauses for the client to run it).
func (p *Planner) toolFor(req *orchestrate.Request) *Tool {
	if len(req.ClientTools) == 0 {
		return p.Tool()
	}
	var tools []registry.Tool
	if p.opts.Catalog != nil {
		tools = p.opts.Catalog.List()
	}
	tools = append(tools, orchestrate.ClientRegistryTools(req.ClientTools)...)
	return Build(0, tools, BuildOptions{Forbidden: p.opts.Forbidden, MaxSteps: p.opts.Engine.Limits().MaxSteps})
}
