package nestful

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/schemas"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/registry"
)

// Mutation is an invalid variant of a sample's plan and the validation
// error it must produce.
type Mutation struct {
	// Kind is "missing_field", "forward_ref" or "wrong_type".
	Kind string
	// Plan is the mutated plan, a copy; the sample's plan is unchanged.
	Plan map[string]any
	// WantCode is the error code the validator must report:
	// "field_not_found", "forward_ref" or "type_mismatch".
	WantCode string
	// Step is the index of the mutated top-level step.
	Step int
	// Argument is the top-level argument of that step holding the bad template.
	Argument string
}

// ForwardRefArgument is the argument a forward_ref mutation adds to a step.
// Every NESTFUL tool accepts unknown arguments, so the reference itself is
// the only fault.
const ForwardRefArgument = "forward_ref"

type planStep struct {
	id, tool string
	args     map[string]any
}

func planSteps(plan map[string]any) []planStep {
	raw, _ := plan["steps"].([]any)
	out := make([]planStep, len(raw))
	for i, r := range raw {
		m, _ := r.(map[string]any)
		out[i].id, _ = m["id"].(string)
		out[i].tool, _ = m["tool"].(string)
		out[i].args, _ = m["arguments"].(map[string]any)
	}
	return out
}

// Mutate returns at most one mutation of each kind that is meaningful for s:
//
//   - missing_field: a template's last field renamed to one its output
//     schema does not declare, where that schema is closed;
//   - forward_ref: a step given an argument referencing a later step;
//   - wrong_type: a typed argument fed a typed field of an earlier step
//     whose type does not fit (schemas.Compatible: integer and number fit each other; string arguments are
//     left alone, since values may be rendered into them).
//
// tools maps catalog names to tools, as Dataset.Tools. The choices depend
// only on s and rng.
func Mutate(s Sample, tools map[string]registry.Tool, rng *rand.Rand) []Mutation {
	steps := planSteps(s.Plan)
	var out []Mutation
	if m, ok := missingField(s.Plan, steps, tools, rng); ok {
		out = append(out, m)
	}
	if m, ok := forwardRef(s.Plan, steps, rng); ok {
		out = append(out, m)
	}
	if m, ok := wrongType(s.Plan, steps, tools, rng); ok {
		out = append(out, m)
	}
	return out
}

type edit struct {
	step     int
	arg      string
	loc      []any // keys and indexes inside the argument value
	old, new string
	replace  bool // replace the whole argument value with new
}

func (e edit) apply(plan map[string]any) map[string]any {
	p := deepCopy(plan).(map[string]any)
	step := p["steps"].([]any)[e.step].(map[string]any)
	args, _ := step["arguments"].(map[string]any)
	if args == nil {
		args = map[string]any{}
		step["arguments"] = args
	}
	if e.replace {
		args[e.arg] = e.new
		return p
	}
	set := func(old any) any { return strings.Replace(old.(string), e.old, e.new, 1) }
	if len(e.loc) == 0 {
		args[e.arg] = set(args[e.arg])
		return p
	}
	cur := args[e.arg]
	for i, k := range e.loc {
		last := i == len(e.loc)-1
		switch k := k.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				m[k] = set(m[k])
			}
			cur = m[k]
		case int:
			a := cur.([]any)
			if last {
				a[k] = set(a[k])
			}
			cur = a[k]
		}
	}
	return p
}

// walkStrings calls f for every string in v with its location.
func walkStrings(v any, loc []any, f func(loc []any, s string)) {
	switch v := v.(type) {
	case string:
		f(slices.Clone(loc), v)
	case []any:
		for i, e := range v {
			walkStrings(e, append(loc, i), f)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walkStrings(v[k], append(loc, k), f)
		}
	}
}

// schemaAt walks path in an output schema; nil when the path leaves what
// the schema declares.
func schemaAt(s *jsonschema.Schema, path []seg) *jsonschema.Schema {
	for _, sg := range path {
		if s == nil {
			return nil
		}
		if sg.IsIndex {
			s = s.Items
		} else {
			s = s.Properties[sg.Field]
		}
	}
	return s
}

const missingName = "no_such_field"

func missingField(plan map[string]any, steps []planStep, tools map[string]registry.Tool, rng *rand.Rand) (Mutation, bool) {
	index := map[string]int{}
	for i, st := range steps {
		index[st.id] = i
	}
	var cands []edit
	for i, st := range steps {
		for _, k := range slices.Sorted(maps.Keys(st.args)) {
			walkStrings(st.args[k], nil, func(loc []any, str string) {
				for _, t := range findTemplates(str) {
					j, ok := index[t.ID]
					if !ok || j >= i {
						continue
					}
					out := tools[steps[j].tool].OutputSchema
					path := slices.Clone(t.Path)
					if n := len(path); n > 0 && !path[n-1].IsIndex {
						if !closed(schemaAt(out, path[:n-1])) {
							continue
						}
						path[n-1].Field = missingName
					} else {
						if !closed(schemaAt(out, path)) {
							continue
						}
						path = append(path, seg{Field: missingName})
					}
					r := ref{ID: t.ID, Path: path}
					repl := r.whole()
					if t.Interpolated {
						repl = r.interp()
					}
					cands = append(cands, edit{step: i, arg: k, loc: loc, old: t.Text, new: repl})
				}
			})
		}
	}
	if len(cands) == 0 {
		return Mutation{}, false
	}
	e := cands[rng.IntN(len(cands))]
	return Mutation{Kind: "missing_field", Plan: e.apply(plan), WantCode: "field_not_found", Step: e.step, Argument: e.arg}, true
}

func forwardRef(plan map[string]any, steps []planStep, rng *rand.Rand) (Mutation, bool) {
	if len(steps) < 2 {
		return Mutation{}, false
	}
	i := rng.IntN(len(steps) - 1)
	j := i + 1 + rng.IntN(len(steps)-1-i)
	arg := ForwardRefArgument
	for n := 2; steps[i].args[arg] != nil; n++ {
		arg = fmt.Sprintf("%s_%d", ForwardRefArgument, n)
	}
	e := edit{step: i, arg: arg, new: ref{ID: steps[j].id}.whole(), replace: true}
	return Mutation{Kind: "forward_ref", Plan: e.apply(plan), WantCode: "forward_ref", Step: i, Argument: arg}, true
}

// typedFields lists the paths of s (through properties and [0]) whose
// schema has exactly one type, to depth 4.
func typedFields(s *jsonschema.Schema, path []seg, depth int, f func(path []seg, typ string)) {
	if s == nil || depth > 4 {
		return
	}
	if len(path) > 0 {
		if t := typesOf(s); len(t) == 1 {
			f(path, t[0])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		typedFields(s.Properties[k], append(slices.Clone(path), seg{Field: k}), depth+1, f)
	}
	if s.Items != nil {
		typedFields(s.Items, append(slices.Clone(path), seg{IsIndex: true}), depth+1, f)
	}
}

func wrongType(plan map[string]any, steps []planStep, tools map[string]registry.Tool, rng *rand.Rand) (Mutation, bool) {
	var cands []edit
	for i, st := range steps {
		in := tools[st.tool].InputSchema
		if in == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(in.Properties)) {
			want := typesOf(in.Properties[k])
			if len(want) == 0 || slices.Contains(want, "string") {
				continue
			}
			for j := range i {
				typedFields(tools[steps[j].tool].OutputSchema, nil, 0, func(path []seg, typ string) {
					if schemas.Compatible([]string{typ}, want) {
						return // the validator cannot tell these apart before run time
					}
					cands = append(cands, edit{step: i, arg: k, new: ref{ID: steps[j].id, Path: path}.whole(), replace: true})
				})
			}
		}
	}
	if len(cands) == 0 {
		return Mutation{}, false
	}
	e := cands[rng.IntN(len(cands))]
	return Mutation{Kind: "wrong_type", Plan: e.apply(plan), WantCode: "type_mismatch", Step: e.step, Argument: e.arg}, true
}
