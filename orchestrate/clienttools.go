package orchestrate

import (
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/orchestra-mcp/orchestra/internal/schemaload"
	"github.com/orchestra-mcp/orchestra/registry"
)

// clientTools is a catalog with the tools a request declares added.
type clientTools struct {
	Tools
	own   map[string]registry.Tool
	names []string
}

func (c *clientTools) Lookup(name string) (registry.Tool, bool) {
	if t, ok := c.own[name]; ok {
		return t, true
	}
	return c.Tools.Lookup(name)
}

func (c *clientTools) Names() []string { return c.names }

// withClientTools returns tools with the declared client tools added, and
// the problems of the declarations.
func withClientTools(tools Tools, decl []*ClientTool) (Tools, []*Issue) {
	if len(decl) == 0 {
		return tools, nil
	}
	var issues []*Issue
	own := map[string]registry.Tool{}
	for i, ct := range decl {
		path := fmt.Sprintf("client_tools[%d]", i)
		switch _, taken := tools.Lookup(ct.Name); {
		case !registry.NamePattern.MatchString(ct.Name):
			issues = append(issues, &Issue{Path: path + ".name", Code: CodeInvalidValue, Message: fmt.Sprintf("client tool name %q must match %s", ct.Name, registry.NamePattern)})
			continue
		case taken:
			issues = append(issues, &Issue{Path: path + ".name", Code: CodeInvalidValue, Message: fmt.Sprintf("client tool %q has the name of a server tool; rename it", ct.Name)})
			continue
		case own[ct.Name].Name != "":
			issues = append(issues, &Issue{Path: path + ".name", Code: CodeInvalidValue, Message: fmt.Sprintf("client tool %q is declared twice", ct.Name)})
			continue
		}
		t := registry.Tool{Name: ct.Name, Description: ct.Description, Mode: registry.ClientFinal, Source: "client"}
		var err error
		if t.InputSchema, err = clientSchema(fmt.Sprintf("client tool %q input_schema", ct.Name), ct.InputSchema); err != nil {
			issues = append(issues, &Issue{Path: path + ".input_schema", Code: CodeInvalidValue, Message: "input_schema is not a usable JSON Schema: " + err.Error()})
			continue
		}
		if t.InputSchema == nil {
			t.InputSchema = &jsonschema.Schema{Type: "object"}
		}
		if t.OutputSchema, err = clientSchema(fmt.Sprintf("client tool %q output_schema", ct.Name), ct.OutputSchema); err != nil {
			issues = append(issues, &Issue{Path: path + ".output_schema", Code: CodeInvalidValue, Message: "output_schema is not a usable JSON Schema: " + err.Error()})
			continue
		}
		own[ct.Name] = t
	}
	names := slices.Clone(tools.Names())
	for n := range own {
		names = append(names, n)
	}
	slices.Sort(names)
	return &clientTools{Tools: tools, own: own, names: names}, issues
}

// clientSchema loads a declared schema through the schema loader, nil for
// none.
func clientSchema(source string, m map[string]any) (*jsonschema.Schema, error) {
	if m == nil {
		return nil, nil
	}
	return schemaload.Load(source, m, schemaload.DefaultLimits())
}

// ClientRegistryTools returns the usable declarations of decl as catalog
// tools (client-final), for a planner to offer.
func ClientRegistryTools(decl []*ClientTool) []registry.Tool {
	tools, _ := withClientTools(registry.NewCatalog(), decl)
	ct, ok := tools.(*clientTools)
	if !ok {
		return nil
	}
	out := make([]registry.Tool, 0, len(ct.own))
	for _, n := range ct.names {
		out = append(out, ct.own[n])
	}
	return out
}
