package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/rank"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// DiscoveryToolName is the tool that describes the tools a plan can call
// but tools/list does not show (expose_downstream: false).
const DiscoveryToolName = "orchestra_tools"

// maxDiscovered caps the tools one orchestra_tools call describes.
const maxDiscovered = 10

type discoveryInput struct {
	Names []string `json:"names,omitempty"`
	Query string   `json:"query,omitempty"`
}

// discoveryOutput is the answer of orchestra_tools, sent as JSON text: it
// declares no outputSchema, which every client would pay for in tools/list.
type discoveryOutput struct {
	Tools []discoveredTool `json:"tools"`
	// Others names the tools not described.
	Others []string `json:"others,omitempty"`
}

type discoveredTool struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	InputSchema  any    `json:"input_schema,omitempty"`
	OutputSchema any    `json:"output_schema,omitempty"`
}

// syncDiscovery lists orchestra_tools while some tool of the catalog is not
// listed, and removes it otherwise. The caller holds a.mu.
func (a *App) syncDiscovery(needed bool) {
	if !needed {
		a.Server.RemoveTools(DiscoveryToolName)
		return
	}
	mcp.AddTool(a.Server, &mcp.Tool{
		Name:        DiscoveryToolName,
		Description: "Describes the unlisted tools plans can call: by names, or the " + fmt.Sprint(maxDiscovered) + " best for a query.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, a.discover)
}

// discover answers orchestra_tools.
func (a *App) discover(ctx context.Context, req *mcp.CallToolRequest, in discoveryInput) (*mcp.CallToolResult, any, error) {
	tools := a.Catalog.List()
	if allow := a.callerTools(req.Extra); allow != nil { // a tenant's caller learns only of its tools
		tools = registry.Filter(tools, func(t registry.Tool) bool { return allow(t.Name) })
	}
	tools = viewed(tools, a.workflowView(a.caller(req.Extra))) // and of its own workflows
	out := discoveryOutput{Tools: []discoveredTool{}}
	picked := map[string]bool{}
	describe := func(t registry.Tool) {
		if picked[t.Name] || len(out.Tools) >= maxDiscovered {
			return
		}
		picked[t.Name] = true
		d := discoveredTool{Name: t.Name, Description: t.Description}
		if t.InputSchema != nil {
			d.InputSchema = schemas.PortableOr(t.InputSchema)
		}
		if t.OutputSchema != nil {
			d.OutputSchema = schemas.PortableOr(t.OutputSchema)
		}
		out.Tools = append(out.Tools, d)
	}
	byName := map[string]registry.Tool{}
	for _, t := range tools {
		byName[t.Name] = t
	}
	var unknown []string
	for _, n := range in.Names {
		if t, ok := byName[n]; ok {
			describe(t)
		} else {
			unknown = append(unknown, n)
		}
	}
	if q := strings.TrimSpace(in.Query); q != "" {
		docs := make([]string, len(tools))
		for i, t := range tools {
			docs[i] = planner.ToolDocument(t)
		}
		ix := rank.New(docs)
		scores := ix.Scores(q)
		for _, i := range ix.Top(q, maxDiscovered) {
			if scores[i] > 0 {
				describe(tools[i])
			}
		}
	}
	for _, t := range tools {
		if !picked[t.Name] {
			out.Others = append(out.Others, t.Name)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("unknown tools %s; the tools are %s", strings.Join(unknown, ", "), strings.Join(append(names(out.Tools), out.Others...), ", "))
	}
	data, _ := json.Marshal(out)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}, nil, nil
}

func names(ts []discoveredTool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}
