package workflows

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// Infer makes a workflow of a run's plan and bindings. Every binding the
// plan reads becomes a parameter, and so does every literal scalar argument
// of a tool step (the path a planner wrote, say), which the plan then reads
// as $bindings.<name>: a call with new arguments runs the same steps on new
// values. A parameter's schema is what its tool's inputSchema says of the
// argument it feeds, else the type of its value; its default is the value
// the run had, so that a call may leave it out. Its description says what
// it feeds.
func Infer(name, description string, plan *orchestrate.Plan, bindings map[string]any, tools orchestrate.Tools) (*Workflow, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	// A copy: lifting arguments rewrites the plan.
	data, err := json.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("encoding the plan of workflow %s: %w", name, err)
	}
	p, issues := orchestrate.DecodePlan(data)
	if len(issues) > 0 {
		return nil, fmt.Errorf("the plan of workflow %s does not decode: %s", name, issues[0].Message)
	}
	in := &inference{tools: tools, props: map[string]*jsonschema.Schema{}, feeds: map[string][]string{}, values: map[string]any{}}
	for _, u := range p.BindingUses() {
		val, ok := bindings[u.Binding]
		if !ok {
			continue // validation names it
		}
		in.add(u.Binding, val, in.argumentSchema(u), u.String())
	}
	for _, s := range p.All() {
		if s.Tool == "" || s.IsGroup() || s.InLoop() {
			continue
		}
		for _, arg := range slices.Sorted(maps.Keys(s.Arguments)) {
			val := s.Arguments[arg]
			if !liftable(val) {
				continue
			}
			use := orchestrate.BindingUse{Step: s, Field: "arguments", At: []orchestrate.Seg{{Key: arg}}, Whole: true}
			pname := in.nameFor(arg, s.ID, val)
			in.add(pname, val, in.argumentSchema(use), use.String())
			s.Arguments[arg] = "$bindings." + pname
		}
	}
	for n, sch := range in.props {
		sch.Description = "Feeds " + strings.Join(in.feeds[n], ", ") + "."
	}
	planJSON, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the plan of workflow %s: %w", name, err)
	}
	if description == "" {
		description = "Runs a saved plan of " + describeTools(p) + "."
	}
	return &Workflow{Name: name, Description: description, Version: 1,
		Parameters: &jsonschema.Schema{Type: "object", Properties: in.props}, Plan: planJSON}, nil
}

type inference struct {
	tools  orchestrate.Tools
	props  map[string]*jsonschema.Schema
	feeds  map[string][]string
	values map[string]any // the value of each parameter, to tell a clash from a share
}

// add makes name a parameter (once) with val as its default.
func (in *inference) add(name string, val any, fromTool *jsonschema.Schema, feeds string) {
	if _, ok := in.props[name]; !ok {
		s := fromTool
		if s == nil {
			s = orchestrate.ValueSchema(val)
		}
		s.Default, _ = json.Marshal(val)
		in.props[name] = s
		in.values[name] = val
	}
	if !slices.Contains(in.feeds[name], feeds) {
		in.feeds[name] = append(in.feeds[name], feeds)
	}
}

// nameFor names the parameter a literal argument becomes: the argument's
// name, shared by steps that pass the same value, else with the step's id
// before it, and a number after that when even this is taken. A name is
// always one the plan can read as $bindings.<name> (an argument named
// "page size", a step "1").
func (in *inference) nameFor(arg, step string, val any) string {
	free := func(name string) bool {
		prev, taken := in.values[name]
		return !taken || equalJSON(prev, val)
	}
	name := orchestrate.BindingName(arg)
	if free(name) {
		return name
	}
	name = orchestrate.BindingName(step + "_" + arg)
	for n := 2; !free(name); n++ {
		name = orchestrate.BindingName(fmt.Sprintf("%s_%s_%d", step, arg, n))
	}
	return name
}

// argumentSchema returns the schema a tool's inputSchema gives the
// argument u feeds, when u passes a whole value to a tool; nil otherwise.
func (in *inference) argumentSchema(u orchestrate.BindingUse) *jsonschema.Schema {
	if !u.Whole || u.Step == nil || u.Field != "arguments" || u.Step.Tool == "" || len(u.Path) > 0 {
		return nil
	}
	t, ok := in.tools.Lookup(u.Step.Tool)
	if !ok || t.InputSchema == nil {
		return nil
	}
	n, err := schemas.Walk(t.InputSchema, u.At)
	if err != nil {
		return nil
	}
	s := orchestrate.NodeSchema(n)
	if s.Type == "" && len(s.Types) == 0 {
		return nil // the tool says nothing of it: the value's type says more
	}
	return s
}

// liftable reports whether an argument's value becomes a parameter: a
// scalar written out, not a template.
func liftable(v any) bool {
	switch v := v.(type) {
	case string:
		return !strings.Contains(v, "$")
	case bool, float64, int, int64, json.Number:
		return true
	}
	return false
}

func equalJSON(a, b any) bool {
	da, _ := json.Marshal(a)
	db, _ := json.Marshal(b)
	return string(da) == string(db)
}

// describeTools lists the tools a plan calls, for a default description.
func describeTools(p *orchestrate.Plan) string {
	var names []string
	for _, s := range p.All() {
		if s.Tool != "" && !slices.Contains(names, s.Tool) {
			names = append(names, s.Tool)
		}
	}
	if len(names) == 0 {
		return "no tool"
	}
	return strings.Join(names, ", ")
}
