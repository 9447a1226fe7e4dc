package orchestrate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/suggest"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// Tools is what the validator and executor need of a catalog.
type Tools interface {
	Lookup(name string) (registry.Tool, bool)
	Names() []string
}

// Validation is the result of plan-time validation.
type Validation struct {
	// Errors are the problems that stop the plan from running.
	Errors []*Issue `json:"errors"`
	// Warnings are what could not be checked or looks wrong but may work.
	Warnings []*Issue `json:"warnings"`
}

// OK reports whether the plan may run.
func (v *Validation) OK() bool { return len(v.Errors) == 0 }

type validator struct {
	tools     Tools
	lim       Limits
	forbidden func(string) bool
	bindings  map[string]any
	plan      *Plan
	byName    map[string]*Step
	all       []*Step // p.All(), computed once
	templates int
	res       Validation
	tmpl      templateCache
	loops     map[*Step]*loopSource // validate_flow.go
}

// validate checks p against every rule of plan-time validation and reports
// all problems at once.
func validate(p *Plan, tools Tools, lim Limits, bindings map[string]any, forbidden func(string) bool) *Validation {
	return validateCached(p, tools, lim, bindings, forbidden, templateCache{vars: p.loopVars()})
}

// validateCached is validate, keeping the parsed templates in tmpl.
func validateCached(p *Plan, tools Tools, lim Limits, bindings map[string]any, forbidden func(string) bool, tmpl templateCache) *Validation {
	all := p.All()
	v := &validator{tools: tools, lim: lim, forbidden: forbidden, bindings: bindings, plan: p, byName: make(map[string]*Step, len(all)), all: all, tmpl: tmpl}
	// A plan over max_steps or max_nesting is refused for that alone: its
	// steps are not checked, so that 14,000 unknown tools cost no
	// "did you mean" search each.
	if v.limits(); len(v.res.Errors) > 0 && (v.res.Errors[0].Code == CodeTooManySteps || v.res.Errors[0].Code == CodeTooDeep) {
		v.all = nil
	}
	v.ids()
	for _, s := range v.all {
		v.flow(s) // when, for_each: validate_flow.go
		if s.IsGroup() || s.IsLoop() {
			continue
		}
		v.step(s)
	}
	if v.all != nil {
		v.finals()
	}
	v.toolCalls()
	if v.templates > lim.MaxTemplates {
		v.errorf(nil, CodeTooLarge, "the plan has %d template references; the limit is %d (limits.max_templates). Reshape data with a json_query step instead of many references", v.templates, lim.MaxTemplates)
	}
	v.res.Errors = capIssues(v.res.Errors, "errors")
	v.res.Warnings = capIssues(v.res.Warnings, "warnings")
	if v.res.Errors == nil {
		v.res.Errors = []*Issue{}
	}
	if v.res.Warnings == nil {
		v.res.Warnings = []*Issue{}
	}
	return &v.res
}

// MaxIssues caps the errors, and the warnings, that one validation
// reports; the rest are counted in a last issue with CodeTooManyIssues.
const MaxIssues = 100

// capIssues keeps the first MaxIssues issues and says how many were left out.
func capIssues(issues []*Issue, what string) []*Issue {
	if len(issues) <= MaxIssues {
		return issues
	}
	more := len(issues) - MaxIssues
	issues = append(issues[:MaxIssues:MaxIssues], &Issue{Code: CodeTooManyIssues, Message: fmt.Sprintf("%d more %s are not listed; fix these and validate again (\"dry_run\": true)", more, what)})
	return issues
}

func (v *validator) issue(s *Step, code Code, format string, args ...any) *Issue {
	is := &Issue{Code: code, Message: fmt.Sprintf(format, args...)}
	if s != nil {
		idx := s.index
		is.Step, is.StepID, is.Path = &idx, s.ID, "plan."+strings.TrimPrefix(s.path, "plan.")
	}
	return is
}

func (v *validator) errorf(s *Step, code Code, format string, args ...any) *Issue {
	is := v.issue(s, code, format, args...)
	v.res.Errors = append(v.res.Errors, is)
	return is
}

func (v *validator) warnf(s *Step, code Code, format string, args ...any) *Issue {
	is := v.issue(s, code, format, args...)
	v.res.Warnings = append(v.res.Warnings, is)
	return is
}

func (v *validator) limits() {
	leaves := 0
	for _, s := range v.all {
		if !s.IsGroup() {
			leaves++
		}
	}
	if leaves > v.lim.MaxSteps {
		v.errorf(nil, CodeTooManySteps, "the plan has %d tool steps; the limit is %d (limits.max_steps). Split the work into several calls or drop steps", leaves, v.lim.MaxSteps)
	}
	for _, s := range v.all {
		// Only the outermost group over the limit is reported: groups
		// nested a thousand deep make one error, not a thousand.
		if (s.IsGroup() || s.IsLoop()) && s.depth == v.lim.MaxNesting {
			v.errorf(s, CodeTooDeep, "parallel groups nest %d deep here; the limit is %d (limits.max_nesting). Flatten the nested groups into one", s.depth+1, v.lim.MaxNesting)
		}
		if s.Retry != nil && s.Retry.MaxAttempts > v.lim.MaxAttempts {
			v.errorf(s, CodeInvalidValue, "retry.max_attempts is %d; the limit is %d", s.Retry.MaxAttempts, v.lim.MaxAttempts)
		}
	}
}

func (v *validator) ids() {
	owner := make(map[string]*Step, len(v.all))
	claim := func(s *Step, name, what string) {
		if prev, ok := owner[name]; ok && prev != s {
			v.errorf(s, CodeDuplicateID, "%s %q is already used by the step at %s; ids and result keys are unique across the plan", what, name, prev.path)
			return
		}
		owner[name] = s
		v.byName[name] = s
	}
	for _, s := range v.all {
		if s.explicit {
			claim(s, s.ID, "id")
		}
		if s.ResultKey != "" {
			claim(s, s.ResultKey, "result_key")
		}
	}
}

// argRef is one template reference found in a step's arguments.
type argRef struct {
	path   []Seg // where in the arguments
	ref    *Ref
	whole  bool // the whole string is the reference
	tmpl   string
	argRaw string // the string the reference is in
}

func (v *validator) step(s *Step) {
	tool, ok := v.tools.Lookup(s.Tool)
	if !ok {
		sugg := suggest.Closest(s.Tool, v.tools.Names(), 3)
		is := v.errorf(s, CodeUnknownTool, "unknown tool %q", s.Tool)
		is.Path += ".tool"
		is.Suggestions = sugg
		if len(sugg) > 0 {
			is.Message += fmt.Sprintf("; did you mean %q?", sugg[0])
		} else {
			is.Message += "; list the tools with tools/list or `orchestra tools`"
		}
	} else if v.forbidden != nil && v.forbidden(s.Tool) {
		is := v.errorf(s, CodeForbiddenTool, "tool %q cannot be called from a plan (a plan may not start another orchestration on the same server)", s.Tool)
		is.Path += ".tool"
	}
	if ok && tool.Name == AskUserTool {
		// Whether the question may pause is known before anything runs
		// (a loop refuses it then), so if_no_user is read as written.
		if val, isStr := s.Arguments["if_no_user"].(string); isStr && mayBeTemplate(val) {
			v.argIssue(s, []Seg{{Key: "if_no_user"}}, CodeInvalidArguments,
				"if_no_user is read as written, before the run, to know whether the question may pause: write \"fail\" or \"pause\", not a template (%q)", val)
		}
	}
	if ok && tool.SchemaProblem != "" {
		v.warnf(s, CodeSchemaProblem, "the schemas of %q could not be used (%s); its arguments are checked only by the tool", s.Tool, tool.SchemaProblem)
	}

	var refs []argRef
	hasTemplates := false
	var walk func(val any, path []Seg)
	walk = func(val any, path []Seg) {
		switch val := val.(type) {
		case string:
			if name, ok := mustachePlaceholder(val); ok {
				v.argWarning(s, path, CodeMustache, "%q looks like a Mustache placeholder, which nothing fills: it is passed as plain text. In render's Go templates write {{.%s}} with values: {%q: ...}; to insert a binding or a step's output write ${bindings.%s} or ${<step>.output.<field>}", val, name, name, name)
			}
			if ref, msg, ok := v.bareReference(val); ok {
				v.argIssue(s, path, CodeBareReference, "%s", msg).Template = ref
				hasTemplates = true
				return
			}
			if !mayBeTemplate(val) {
				return
			}
			t, err := v.tmpl.parse(val)
			if err != nil {
				is := v.argIssue(s, path, CodeBadTemplate, "%v", err)
				is.Template = val
				hasTemplates = true
				return
			}
			switch t.Kind {
			case Literal:
				if name, ok := looksLikeTemplate(val); ok && v.knownName(name) {
					v.argWarning(s, path, CodeNotATemplate, "%q is passed as plain text; to reference a step's output write $%s.output.<field>", val, name)
				}
				return
			case Whole:
				refs = append(refs, argRef{path: slices.Clone(path), ref: t.Ref, whole: true, tmpl: val, argRaw: val})
			case Interpolated:
				kept := slices.Clone(path)
				for _, p := range t.Parts {
					if r := p.Ref; r != nil {
						refs = append(refs, argRef{path: kept, ref: r, tmpl: r.Text, argRaw: val})
					}
				}
			}
			hasTemplates = true
		case map[string]any:
			// path is used as a stack: what is kept of it is cloned.
			for _, k := range sortedKeys(val) {
				walk(val[k], append(path, Seg{Key: k}))
			}
		case []any:
			for i, e := range val {
				walk(e, append(path, Seg{Index: i, IsIndex: true}))
			}
		}
	}
	walk(s.Arguments, make([]Seg, 0, 8))
	v.templates += len(refs)

	for _, r := range refs {
		v.ref(s, tool, ok, r)
	}
	if !ok || tool.SchemaProblem != "" || tool.InputSchema == nil {
		return
	}
	if !hasTemplates {
		v.literal(s, schemas.At(tool.InputSchema), s.Arguments, make([]Seg, 0, 8))
		return
	}
	v.structure(s, schemas.At(tool.InputSchema), s.Arguments, make([]Seg, 0, 8))
}

func appendSeg(path []Seg, s Seg) []Seg {
	out := make([]Seg, len(path), len(path)+1)
	copy(out, path)
	return append(out, s)
}

// bareReference finds a reference written inside longer text without the
// ${...} it needs there (see bareReference) and returns it with the
// error's message.
func (v *validator) bareReference(val string) (ref, msg string, ok bool) {
	ref, ok = bareReference(val, v.tmpl.vars, v.knownName)
	if !ok {
		return "", "", false
	}
	return ref, fmt.Sprintf("%s is inside longer text, where a reference must be written ${...}: write ${%s}; as it is, it would be passed on as plain text", ref, ref[1:]), true
}

func (v *validator) knownName(name string) bool {
	if name == "bindings" {
		return true
	}
	if _, ok := v.byName[name]; ok {
		return true
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 0 && n < len(v.plan.Steps) {
		return true
	}
	return false
}

func (v *validator) argIssue(s *Step, path []Seg, code Code, format string, args ...any) *Issue {
	return locate(v.errorf(s, code, format, args...), path)
}

func (v *validator) argWarning(s *Step, path []Seg, code Code, format string, args ...any) *Issue {
	return locate(v.warnf(s, code, format, args...), path)
}

// locate points an issue at the argument at path.
func locate(is *Issue, path []Seg) *Issue {
	is.Path += ".arguments" + PathString(path)
	if len(path) > 0 && !path[0].IsIndex {
		is.Argument = path[0].Key
	}
	return is
}

// ref checks one template reference: its target, order, field and type.
func (v *validator) ref(s *Step, tool registry.Tool, haveTool bool, r argRef) {
	fail := func(code Code, format string, args ...any) *Issue {
		is := v.argIssue(s, r.path, code, format, args...)
		is.Template = r.tmpl
		return is
	}
	warn := func(code Code, format string, args ...any) *Issue {
		is := v.argWarning(s, r.path, code, format, args...)
		is.Template = r.tmpl
		return is
	}
	node, found := v.refNode(s, r.ref, fail, warn)
	if !found {
		return
	}
	if !haveTool || tool.InputSchema == nil || tool.SchemaProblem != "" {
		return
	}
	want, err := schemas.Walk(tool.InputSchema, r.path)
	if err != nil {
		return // an argument the schema does not know: reported by the structure check
	}
	wantTypes := want.Types()
	if !r.whole {
		if !schemas.Compatible([]string{"string"}, wantTypes) {
			fail(CodeTypeMismatch, "%q interpolates into a string, but %q expects %s; pass the value alone as %q to keep its type", r.argRaw, argName(r.path), typeList(wantTypes), r.ref.Canonical())
		}
		return
	}
	got := node.Types()
	if !schemas.Compatible(got, wantTypes) {
		fail(CodeTypeMismatch, "%s is %s, but %q of %q expects %s", r.ref.Canonical(), typeList(got), argName(r.path), s.Tool, typeList(wantTypes))
	}
}

// refNode returns the schema node of the value ref refers to from step s:
// a binding's, a loop variable's, or a field of an earlier step's output.
// Problems go to fail and warn; found is false when ref leads nowhere.
func (v *validator) refNode(s *Step, ref *Ref, fail, warn func(code Code, format string, args ...any) *Issue) (node schemas.Node, found bool) {
	if ref.Var != "" {
		return v.varNode(s, ref, fail)
	}
	if ref.IsBinding() {
		val, ok := v.bindings[ref.Binding]
		if !ok {
			is := fail(CodeUnknownBinding, "binding %q is not in the request's bindings; add it to \"bindings\" or fix the name", ref.Binding)
			is.AvailableFields = sortedKeys(v.bindings)
			is.Suggestions = suggest.Closest(ref.Binding, is.AvailableFields, 3)
			return node, false
		}
		got, err := followPath(val, ref.Path)
		if err != nil {
			is := fail(CodeFieldNotFound, "in binding %q: %v", ref.Binding, err)
			if pe, ok := err.(*PathError); ok {
				is.AvailableFields = pe.Available
				is.Suggestions = suggestField(ref.Path, pe.At, pe.Available)
			}
			return node, false
		}
		node = typedNode(schemas.ValueType(got))
	} else {
		target, code, msg := v.target(s, ref)
		if target == nil {
			is := fail(code, "%s", msg)
			if _, byIndex := ref.StepIndex(); code == CodeUnknownRef && !byIndex {
				names := sortedKeys(v.byName)
				is.Suggestions = suggest.Closest(ref.Step, names, 3)
			}
			return node, false
		}
		n, unchecked, werr := v.outputNode(target, ref.Path)
		if werr != nil {
			is := fail(CodeFieldNotFound, "%s: %s%s", ref.Canonical(), werr.Reason, availableHint(werr.Available))
			is.AvailableFields = werr.Available
			is.Suggestions = suggestField(ref.Path, werr.At, werr.Available)
			return node, false
		}
		if unchecked != "" {
			warn(CodeUncheckedRef, "%s cannot be checked before the plan runs: %s; a missing field fails the step at run time", ref.Canonical(), unchecked)
		}
		v.conditional(s, target, ref, warn)
		node = n
	}
	return node, true
}

// suggestField returns the available names closest to the field of path at
// index at, the one that was not found.
func suggestField(path []Seg, at int, available []string) []string {
	if at < 0 || at >= len(path) || path[at].IsIndex || len(available) == 0 {
		return nil
	}
	return suggest.Closest(path[at].Key, available, 3)
}

func availableHint(av []string) string {
	if len(av) == 0 {
		return ""
	}
	if len(av) > 12 {
		av = append(av[:12:12], "...")
	}
	return "; available: " + strings.Join(av, ", ")
}

func argName(path []Seg) string {
	p := strings.TrimPrefix(PathString(path), ".")
	if p == "" {
		return "arguments"
	}
	return p
}

func typeList(ts []string) string {
	if len(ts) == 0 {
		return "no type"
	}
	return strings.Join(ts, " or ")
}

// typedNode returns the node of a value known only by its JSON type. The
// schemas are shared: schemas.At keeps the nodes of the schemas it sees.
func typedNode(t string) schemas.Node {
	if s, ok := typeSchemas[t]; ok {
		return schemas.At(s)
	}
	return schemas.Node{Open: true}
}

var typeSchemas = func() map[string]*jsonschema.Schema {
	m := map[string]*jsonschema.Schema{}
	for _, t := range []string{"null", "boolean", "integer", "number", "string", "array", "object"} {
		m[t] = &jsonschema.Schema{Type: t}
	}
	return m
}()

// target finds the step a reference names and checks that it ends before s
// starts.
func (v *validator) target(s *Step, r *Ref) (*Step, Code, string) {
	var t *Step
	if idx, ok := r.StepIndex(); ok {
		if idx >= len(v.plan.Steps) {
			return nil, CodeUnknownRef, fmt.Sprintf("%s refers to step %s, but the plan has %d steps (indexes start at 0)", r.Text, r.Step, len(v.plan.Steps))
		}
		t = v.plan.Steps[idx]
	} else {
		var ok bool
		if t, ok = v.byName[r.Step]; !ok {
			return nil, CodeUnknownRef, fmt.Sprintf("%s refers to %q, which is no step id or result key in this plan", r.Text, r.Step)
		}
	}
	for a := s; a != nil; a = a.parent {
		if a == t {
			return nil, CodeSelfRef, fmt.Sprintf("%s refers to the step itself (or the group it is in); a step can use only the outputs of steps that finished before it", r.Text)
		}
	}
	if l := loopOf(t); l != nil && !within(s, l) {
		return nil, CodeInsideLoop, fmt.Sprintf("%s refers to step %s in the do of for_each %s, which runs once per element; use the loop's output, the array of every element's: $%s.output[0]...", r.Text, t.ID, l.ID, l.ID)
	}
	switch {
	case t.index > s.index:
		return nil, CodeForwardRef, fmt.Sprintf("%s refers to step %s, which runs later (step %d comes after step %d); move the step after the one it needs", r.Text, t.ID, t.index, s.index)
	case t.index == s.index:
		return nil, CodeSiblingRef, fmt.Sprintf("%s refers to step %s in the same parallel group, which runs at the same time; move the step after the group", r.Text, t.ID)
	}
	return t, "", ""
}

// outputNode walks path into the output of step t. A non-empty unchecked
// says why it could not be checked.
func (v *validator) outputNode(t *Step, path []Seg) (schemas.Node, string, *schemas.WalkError) {
	if t.IsLoop() {
		return v.loopOutputNode(t, path)
	}
	if !t.IsGroup() {
		tool, ok := v.tools.Lookup(t.Tool)
		if !ok {
			return schemas.Node{Open: true}, "", nil // reported as unknown_tool
		}
		if tool.OutputSchema == nil || tool.SchemaProblem != "" {
			if len(path) > 0 && !path[0].IsIndex && path[0].Key == "text" {
				if len(path) == 1 {
					return typedNode("string"), "", nil
				}
			}
			return schemas.Node{Open: true}, fmt.Sprintf("tool %q declares no output schema", t.Tool), nil
		}
		n, err := schemas.Walk(tool.OutputSchema, path)
		if err != nil {
			we := err.(*schemas.WalkError)
			return schemas.Node{}, "", we
		}
		return n, "", nil
	}
	switch t.Merge {
	case MergeFirstSuccess:
		var nodes []schemas.Node
		why := ""
		for _, c := range t.Parallel {
			n, u, err := v.outputNode(c, path)
			if err != nil {
				err.Reason = fmt.Sprintf("in the output of child %s (any child of a first_success group may win): %s", c.ID, err.Reason)
				return schemas.Node{}, "", err
			}
			if u != "" {
				why = u
			}
			nodes = append(nodes, n)
		}
		return schemas.Union(nodes...), why, nil
	default:
		if len(path) == 0 {
			return typedNode("object"), "", nil
		}
		var keys []string
		for _, c := range t.Parallel {
			keys = append(keys, c.key)
			if !path[0].IsIndex && path[0].Key == c.key {
				n, u, err := v.outputNode(c, path[1:])
				if err != nil {
					err.At++
					return schemas.Node{}, "", err
				}
				if t.Merge == MergeAllSettled && len(path) == 1 {
					n = schemas.Union(n, typedNode("null"))
				}
				return n, u, nil
			}
		}
		return schemas.Node{}, "", &schemas.WalkError{Reason: fmt.Sprintf("group %s collects its children under their keys; %s is none of them", t.ID, PathString(path[:1])), Available: keys}
	}
}
