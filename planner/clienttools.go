package planner

import (
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// withClientTools returns the planning tool t, or, when req declares
// client_tools, one with the catalog's tools and those (they are offered
// like any tool; a plan that calls one pauses for the client to run it).
func (p *Planner) withClientTools(req *orchestrate.Request, t *Tool) *Tool {
	if len(req.ClientTools) == 0 {
		return t
	}
	var tools []registry.Tool
	if p.opts.Catalog != nil {
		tools = p.opts.Catalog.List()
	}
	tools = append(tools, orchestrate.ClientRegistryTools(req.ClientTools)...)
	return Build(0, tools, BuildOptions{Forbidden: p.opts.Forbidden, MaxSteps: p.opts.Engine.Limits().MaxSteps})
}
