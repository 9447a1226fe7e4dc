package orchestrate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// A plan kept for later (a workflow) reads its bindings as parameters: it
// is validated against the schemas its parameters will have rather than
// against values, and the schemas of its bindings and of its return value
// are worked out from the places they feed and the tools' schemas.

// ValidateParameters checks p like Validate, with each binding typed by
// its schema in params rather than known by its value: a reference into a
// binding is checked against the schema, and a binding params lacks is
// unknown_binding.
func (e *Engine) ValidateParameters(p *Plan, params map[string]*jsonschema.Schema) *Validation {
	if params == nil {
		params = map[string]*jsonschema.Schema{}
	}
	tmpl := templateCache{vars: p.loopVars()}
	v := newValidator(p, e.opts.Tools, e.lim, nil, e.opts.Forbidden, tmpl)
	v.params = params
	return v.run()
}

// bindingNode returns the node of the value ref, a binding reference,
// reads: from the binding's value, or from its schema when the plan is
// validated against parameters.
func (v *validator) bindingNode(ref *Ref, fail func(code Code, format string, args ...any) *Issue) (schemas.Node, bool) {
	if v.params != nil {
		ps, ok := v.params[ref.Binding]
		if !ok {
			is := fail(CodeUnknownBinding, "binding %q is no parameter of this plan; add it to the parameters or fix the name", ref.Binding)
			is.AvailableFields = sortedKeys(v.params)
			is.Suggestions = suggest.Closest(ref.Binding, is.AvailableFields, 3)
			return schemas.Node{}, false
		}
		n, err := schemas.Walk(ps, ref.Path)
		if err != nil {
			we := err.(*schemas.WalkError)
			is := fail(CodeFieldNotFound, "in parameter %q: %s%s", ref.Binding, we.Reason, availableHint(we.Available))
			is.AvailableFields = we.Available
			is.Suggestions = suggestField(ref.Path, we.At, we.Available)
			return schemas.Node{}, false
		}
		return n, true
	}
	val, ok := v.bindings[ref.Binding]
	if !ok {
		is := fail(CodeUnknownBinding, "binding %q is not in the request's bindings; add it to \"bindings\" or fix the name", ref.Binding)
		is.AvailableFields = sortedKeys(v.bindings)
		is.Suggestions = suggest.Closest(ref.Binding, is.AvailableFields, 3)
		return schemas.Node{}, false
	}
	got, err := followPath(val, ref.Path)
	if err != nil {
		is := fail(CodeFieldNotFound, "in binding %q: %v", ref.Binding, err)
		if pe, ok := err.(*PathError); ok {
			is.AvailableFields = pe.Available
			is.Suggestions = suggestField(ref.Path, pe.At, pe.Available)
		}
		return schemas.Node{}, false
	}
	return typedNode(schemas.ValueType(got)), true
}

// BindingUse is one place a plan reads a binding.
type BindingUse struct {
	// Binding is the binding's name, and Path what is read inside it
	// ($bindings.cfg.dir reads Path .dir of cfg).
	Binding string
	Path    []Seg
	// Step is the step that reads it; nil for the plan's answer and return.
	Step *Step
	// Field is where: "arguments", "when", "for_each", "answer" or "return".
	Field string
	// At is the position in the step's arguments, or in the return value.
	At []Seg
	// Whole reports that the string is the reference alone, so that the
	// value is passed with its type; otherwise it is interpolated as text.
	Whole bool
}

// BindingUses returns every place p reads a binding, in plan order.
func (p *Plan) BindingUses() []BindingUse {
	tmpl := templateCache{vars: p.loopVars()}
	var out []BindingUse
	var walk func(v any, at []Seg, add func(ref *Ref, at []Seg, whole bool))
	walk = func(v any, at []Seg, add func(ref *Ref, at []Seg, whole bool)) {
		switch v := v.(type) {
		case string:
			if !mayBeTemplate(v) {
				return
			}
			t, err := tmpl.parse(v)
			if err != nil {
				return
			}
			for _, ref := range t.Refs() {
				if ref.IsBinding() {
					add(ref, slices.Clone(at), t.Kind == Whole)
				}
			}
		case map[string]any:
			for _, k := range sortedKeys(v) {
				walk(v[k], append(at, Seg{Key: k}), add)
			}
		case []any:
			for i, e := range v {
				walk(e, append(at, Seg{Index: i, IsIndex: true}), add)
			}
		}
	}
	use := func(s *Step, field string) func(ref *Ref, at []Seg, whole bool) {
		return func(ref *Ref, at []Seg, whole bool) {
			out = append(out, BindingUse{Binding: ref.Binding, Path: ref.Path, Step: s, Field: field, At: at, Whole: whole})
		}
	}
	for _, s := range p.All() {
		if s.When != "" {
			walk(s.When, nil, use(s, "when"))
		}
		if s.ForEach != nil {
			walk(s.ForEach, nil, use(s, "for_each"))
		}
		if s.Arguments != nil {
			walk(s.Arguments, nil, use(s, "arguments"))
		}
	}
	if p.Answer != "" {
		walk(p.Answer, nil, use(nil, "answer"))
	}
	if p.Return != nil {
		walk(p.Return, nil, use(nil, "return"))
	}
	return out
}

// ReturnSchema returns the JSON Schema of the value p's return resolves
// to, as far as the tools' output schemas and the parameters' schemas
// tell: a reference has the schema of what it reads (an empty schema where
// nothing is known), a literal the type of its value, and an object or an
// array the schemas of its members. It is nil when p has no return. The
// schema holds no $ref: a part of a tool's schema that has one is
// replaced by the types it allows.
func ReturnSchema(p *Plan, tools Tools, params map[string]*jsonschema.Schema) *jsonschema.Schema {
	if p.Return == nil {
		return nil
	}
	v := newValidator(p, tools, Limits{}.WithDefaults(), nil, nil, templateCache{vars: p.loopVars()})
	v.params = params
	if v.params == nil {
		v.params = map[string]*jsonschema.Schema{}
	}
	v.ids()
	return v.valueSchema(p.Return)
}

// valueSchema is the schema of a return value; see ReturnSchema.
func (v *validator) valueSchema(val any) *jsonschema.Schema {
	switch val := val.(type) {
	case string:
		if !mayBeTemplate(val) {
			return &jsonschema.Schema{Type: "string"}
		}
		t, err := v.tmpl.parse(val)
		if err != nil || t.Kind == Interpolated {
			return &jsonschema.Schema{Type: "string"}
		}
		if t.Kind == Literal {
			return &jsonschema.Schema{Type: "string"}
		}
		ignore := func(Code, string, ...any) *Issue { return &Issue{} }
		var n schemas.Node
		var ok bool
		if t.Ref.IsBinding() {
			n, ok = v.bindingNode(t.Ref, ignore)
		} else if target := v.finalTarget(t.Ref); target != nil {
			var werr *schemas.WalkError
			n, _, werr = v.outputNode(target, t.Ref.Path)
			ok = werr == nil
		}
		if !ok {
			return &jsonschema.Schema{}
		}
		return NodeSchema(n)
	case map[string]any:
		s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
		for _, k := range sortedKeys(val) {
			s.Properties[k] = v.valueSchema(val[k])
			s.Required = append(s.Required, k)
		}
		return s
	case []any:
		s := &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{}}
		if len(val) > 0 {
			items := make([]*jsonschema.Schema, len(val))
			for i, e := range val {
				items[i] = v.valueSchema(e)
			}
			s.Items = commonSchema(items)
		}
		return s
	}
	return ValueSchema(val)
}

// finalTarget returns the step a reference of the answer or return names.
func (v *validator) finalTarget(ref *Ref) *Step {
	if idx, ok := ref.StepIndex(); ok {
		if idx < len(v.plan.Steps) {
			return v.plan.Steps[idx]
		}
		return nil
	}
	return v.byName[ref.Step]
}

// NodeSchema returns a schema that a value at n satisfies: n's schema
// when it is one schema that stands alone (no $ref into a root it came
// from), else the types n allows ({} for any).
func NodeSchema(n schemas.Node) *jsonschema.Schema {
	if n.Open {
		return &jsonschema.Schema{}
	}
	if ss := n.Schemas(); len(ss) == 1 && ss[0] != nil {
		if data, err := json.Marshal(ss[0]); err == nil && !strings.Contains(string(data), `"$ref"`) {
			out := &jsonschema.Schema{}
			if json.Unmarshal(data, out) == nil {
				return out
			}
		}
	}
	return typesSchema(n.Types())
}

// typesSchema is the schema of a value of one of types (any, when none).
func typesSchema(types []string) *jsonschema.Schema {
	switch len(types) {
	case 0:
		return &jsonschema.Schema{}
	case 1:
		s := &jsonschema.Schema{Type: types[0]}
		if types[0] == "array" {
			s.Items = &jsonschema.Schema{}
		}
		return s
	}
	s := &jsonschema.Schema{Types: slices.Clone(types)}
	if slices.Contains(types, "array") {
		s.Items = &jsonschema.Schema{}
	}
	return s
}

// ValueSchema returns a schema inferred from a JSON value: its type, the
// properties of an object (none required: another value may leave some
// out) and the items of an array (their common schema). A number is a
// number, whole or not: another value may have a fraction.
func ValueSchema(v any) *jsonschema.Schema {
	switch v := v.(type) {
	case map[string]any:
		s := &jsonschema.Schema{Type: "object", Properties: make(map[string]*jsonschema.Schema, len(v))}
		for k, e := range v {
			s.Properties[k] = ValueSchema(e)
		}
		return s
	case []any:
		items := make([]*jsonschema.Schema, len(v))
		for i, e := range v {
			items[i] = ValueSchema(e)
		}
		return &jsonschema.Schema{Type: "array", Items: commonSchema(items)}
	case nil:
		return &jsonschema.Schema{}
	}
	switch t := schemas.ValueType(v); t {
	case "integer", "number":
		return &jsonschema.Schema{Type: "number"}
	case "":
		return &jsonschema.Schema{}
	default:
		return &jsonschema.Schema{Type: t}
	}
}

// commonSchema is the schema of an array's items: theirs when they all
// have the same, else the types they have.
func commonSchema(items []*jsonschema.Schema) *jsonschema.Schema {
	if len(items) == 0 {
		return &jsonschema.Schema{}
	}
	first, _ := json.Marshal(items[0])
	same := true
	var types []string
	for _, s := range items {
		if data, _ := json.Marshal(s); string(data) != string(first) {
			same = false
		}
		switch {
		case s.Type != "":
			types = append(types, s.Type)
		case len(s.Types) > 0:
			types = append(types, s.Types...)
		default:
			return &jsonschema.Schema{} // one of them may be anything
		}
	}
	if same {
		return items[0]
	}
	slices.Sort(types)
	return typesSchema(slices.Compact(types))
}

// String says where the binding is used, for a parameter's description.
func (u BindingUse) String() string {
	switch {
	case u.Step == nil:
		return fmt.Sprintf("the plan's %s", u.Field)
	case u.Field == "arguments":
		return fmt.Sprintf("%s of %s (step %s)", strings.TrimPrefix(PathString(u.At), "."), u.Step.Tool, u.Step.ID)
	default:
		return fmt.Sprintf("the %s of step %s", u.Field, u.Step.ID)
	}
}

// InLoop reports whether s runs once per item of a for_each: it is the
// loop's body or under it.
func (s *Step) InLoop() bool {
	for p := s.parent; p != nil; p = p.parent {
		if p.ForEach != nil {
			return true
		}
	}
	return false
}

// Tools returns the catalog e's plans are validated against.
func (e *Engine) Tools() Tools { return e.opts.Tools }

// WorkflowToolPrefix begins the catalog name of every workflow's tool.
const WorkflowToolPrefix = "workflow__"

// SaveAs asks that a run's plan be kept as the workflow Name (its tool is
// workflow__<Name>) once the run succeeded: its bindings and literal
// arguments become the workflow's parameters. Saving a name again adds a
// version.
type SaveAs struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// SavedWorkflow says which workflow a run's plan was kept as.
type SavedWorkflow struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Tool    string `json:"tool"`
}

var workflowName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// CheckWorkflowName reports whether name may name a workflow, and how to
// fix it.
func CheckWorkflowName(name string) error {
	if !workflowName.MatchString(name) {
		return fmt.Errorf("workflow name %q: use 1 to 64 letters, digits, _ and -, starting with a letter or digit", name)
	}
	return nil
}

func (d *decoder) saveAs(v any, path string) *SaveAs {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("save_as must be an object {\"name\": \"...\", \"description\": \"...\"}, not %s", schemas.TypePhrase(v)))
		return nil
	}
	sa := &SaveAs{}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "name":
			sa.Name = d.str(obj[k], path+".name")
		case "description":
			sa.Description = d.str(obj[k], path+".description")
		default:
			d.unknown(path, k, []string{"name", "description"})
		}
	}
	if err := CheckWorkflowName(sa.Name); err != nil {
		d.add(path+".name", CodeInvalidValue, err.Error())
	}
	return sa
}
