package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
)

// Prefix begins the catalog name of every workflow's tool.
const Prefix = orchestrate.WorkflowToolPrefix

// Source is the catalog source of workflows' tools.
const Source = "workflow"

// ToolName returns the catalog name of the workflow name's tool.
func ToolName(name string) string { return Prefix + name }

// CheckName reports whether name may name a workflow, and how to fix it.
func CheckName(name string) error { return orchestrate.CheckWorkflowName(name) }

// Config is a workflow written in the configuration's workflows block,
// under its name. Export writes stored workflows in the same form.
type Config struct {
	// Description says what the workflow does; its tool's description.
	Description string `yaml:"description" json:"description"`
	// Version numbers it; 0 means 1.
	Version int `yaml:"version,omitempty" json:"version,omitempty"`
	// Parameters is the JSON Schema of its parameters: an object whose
	// properties are the plan's bindings. Empty means none.
	Parameters map[string]any `yaml:"parameters,omitempty" json:"parameters,omitempty"`
	// Plan is the plan, as agent_orchestrate takes it: steps, answer, return.
	Plan map[string]any `yaml:"plan" json:"plan"`
	// Tenants, when set, are the only tenants whose callers see it; a
	// configured workflow without them is visible to every caller.
	Tenants []string `yaml:"tenants,omitempty" json:"tenants,omitempty"`
}

// Validate reports the problems of the workflow name's configuration, each
// prefixed with where it is.
func (c Config) Validate(name string) []string {
	if _, err := FromConfig(name, c); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// Workflow is one version of a workflow, ready to check and call.
type Workflow struct {
	Name        string
	Description string
	Version     int
	// Parameters is the JSON Schema of the parameters: an object schema
	// whose properties are the plan's bindings.
	Parameters *jsonschema.Schema
	// Plan is the normalized plan, as JSON; each call decodes its own.
	Plan json.RawMessage
	// Owner and Tenant are whose a stored workflow is (store.Workflow).
	Owner, Tenant string
	// Configured reports a workflow of the configuration, visible to the
	// callers of Tenants (every caller when it is empty).
	Configured bool
	Tenants    []string
	// SavedFrom is the run a stored workflow was saved from, if any.
	SavedFrom string
}

// FromConfig makes the workflow name of the configuration.
func FromConfig(name string, c Config) (*Workflow, error) {
	where := "workflows." + name
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if c.Plan == nil {
		return nil, fmt.Errorf("%s: plan is required: {steps: [...], return: ...}", where)
	}
	if c.Version < 0 {
		return nil, fmt.Errorf("%s: version must not be negative", where)
	}
	params := c.Parameters
	if params == nil {
		params = map[string]any{"type": "object"}
	}
	w := &Workflow{Name: name, Description: strings.TrimSpace(c.Description), Version: max(c.Version, 1), Configured: true, Tenants: c.Tenants}
	var err error
	if w.Parameters, err = parametersOf(params); err != nil {
		return nil, fmt.Errorf("%s.parameters: %w", where, err)
	}
	raw, err := json.Marshal(c.Plan)
	if err != nil {
		return nil, fmt.Errorf("%s.plan: %w", where, err)
	}
	if w.Plan, err = normalize(raw); err != nil {
		return nil, fmt.Errorf("%s.plan: %w", where, err)
	}
	return w, nil
}

// FromStore makes the workflow of a stored version.
func FromStore(sw store.Workflow) (*Workflow, error) {
	w := &Workflow{Name: sw.Name, Description: sw.Description, Version: sw.Version, Owner: sw.Owner, Tenant: sw.Tenant, SavedFrom: sw.SavedFrom}
	var m map[string]any
	if err := json.Unmarshal(sw.Parameters, &m); err != nil {
		return nil, fmt.Errorf("workflow %s version %d: parameters: %w", sw.Name, sw.Version, err)
	}
	var err error
	if w.Parameters, err = parametersOf(m); err != nil {
		return nil, fmt.Errorf("workflow %s version %d: parameters: %w", sw.Name, sw.Version, err)
	}
	if w.Plan, err = normalize(sw.Plan); err != nil {
		return nil, fmt.Errorf("workflow %s version %d: plan: %w", sw.Name, sw.Version, err)
	}
	return w, nil
}

// Stored returns w as a store row (its version is the store's to set).
func (w *Workflow) Stored() (store.Workflow, error) {
	params, err := json.Marshal(w.Parameters)
	if err != nil {
		return store.Workflow{}, fmt.Errorf("encoding the parameters of workflow %s: %w", w.Name, err)
	}
	return store.Workflow{Owner: w.Owner, Tenant: w.Tenant, Name: w.Name, Description: w.Description, Parameters: params, Plan: w.Plan, SavedFrom: w.SavedFrom}, nil
}

// Config returns w in the configuration's form, for export.
func (w *Workflow) Config() (Config, error) {
	c := Config{Description: w.Description, Version: w.Version, Tenants: w.Tenants}
	if err := roundTrip(w.Parameters, &c.Parameters); err != nil {
		return Config{}, fmt.Errorf("workflow %s: parameters: %w", w.Name, err)
	}
	if err := json.Unmarshal(w.Plan, &c.Plan); err != nil {
		return Config{}, fmt.Errorf("workflow %s: plan: %w", w.Name, err)
	}
	return c, nil
}

// parametersOf reads a parameters schema: an object schema, or nothing.
func parametersOf(m map[string]any) (*jsonschema.Schema, error) {
	var s jsonschema.Schema
	if err := roundTrip(m, &s); err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, errors.New(`must be an object schema: {type: object, properties: {name: {type: string}}}`)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		if s.Properties[name] == nil {
			return nil, fmt.Errorf("property %s has no schema", name)
		}
	}
	return &s, nil
}

func roundTrip(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

// normalize decodes a plan through the one decoding gate and returns it
// normalized, as JSON.
func normalize(raw json.RawMessage) (json.RawMessage, error) {
	p, issues := orchestrate.DecodePlan(raw)
	if len(issues) > 0 {
		msgs := make([]string, len(issues))
		for i, is := range issues {
			msgs[i] = is.Error()
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return json.Marshal(p)
}

// DecodePlan returns a fresh copy of w's plan: a run may annotate the plan
// it runs.
func (w *Workflow) DecodePlan() (*orchestrate.Plan, error) {
	p, issues := orchestrate.DecodePlan(w.Plan)
	if len(issues) > 0 {
		return nil, fmt.Errorf("workflow %s version %d: its plan does not decode: %s", w.Name, w.Version, issues[0].Message)
	}
	return p, nil
}

// params returns the parameters' schemas by name.
func (w *Workflow) params() map[string]*jsonschema.Schema {
	out := make(map[string]*jsonschema.Schema, len(w.Parameters.Properties))
	maps.Copy(out, w.Parameters.Properties)
	return out
}

// CheckError is a workflow that does not fit the catalog as it is now.
type CheckError struct {
	Workflow string
	Version  int
	Issues   []*orchestrate.Issue
}

func (e *CheckError) Error() string {
	parts := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		var where []string
		if is.StepID != "" {
			where = append(where, fmt.Sprintf("step %q", is.StepID))
		}
		if is.Path != "" {
			where = append(where, "field "+is.Path)
		}
		parts[i] = fmt.Sprintf("%s: %s (%s)", strings.Join(where, ", "), is.Message, is.Code)
	}
	return fmt.Sprintf("workflow %q version %d does not fit the tools it calls: %s; save it again from a run that works, or fix the plan", e.Workflow, e.Version, strings.Join(parts, "; "))
}

// Check validates w's plan against the engine's catalog as it is now, each
// binding typed by its parameter's schema. It returns a *CheckError naming
// the workflow, its version, and each step and field that does not fit.
func (w *Workflow) Check(e *orchestrate.Engine) error {
	p, err := w.DecodePlan()
	if err != nil {
		return err
	}
	if v := e.ValidateParameters(p, w.params()); !v.OK() {
		return &CheckError{Workflow: w.Name, Version: w.Version, Issues: v.Errors}
	}
	return nil
}

// OutputSchema returns the outputSchema of w's tool: the schema of its
// plan's return when that is an object, {"result": ...} around it
// otherwise, {"answer": string} for a plan with an answer and no return,
// and nil for a plan with neither.
func (w *Workflow) OutputSchema(tools orchestrate.Tools) *jsonschema.Schema {
	p, err := w.DecodePlan()
	if err != nil {
		return nil
	}
	rs := orchestrate.ReturnSchema(p, tools, w.params())
	switch {
	case rs == nil && p.Answer != "":
		return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"answer": {Type: "string"}}, Required: []string{"answer"}}
	case rs == nil:
		return nil
	case wholeObject(rs) && returnsObject(p):
		return rs
	}
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"result": rs}}
}

// wholeObject reports that a return schema may stand as an outputSchema:
// an object, with no combinator at its top.
func wholeObject(s *jsonschema.Schema) bool {
	return s.Type == "object" && len(s.OneOf)+len(s.AnyOf)+len(s.AllOf) == 0 && s.Not == nil
}
