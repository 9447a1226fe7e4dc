package orchestrate

import (
	"fmt"

	"github.com/orchestra-mcp/orchestra/schemas"
)

// Plan-time checks of control flow: a step's when, a loop's array, its
// variables and its body, the iterations and tool calls known before the
// run. A loop's body is validated once, like any step, with $<as> typed by
// the array's items schema.

// loopSource is what validation knows of the array a loop runs over.
type loopSource struct {
	items  schemas.Node // an element's node
	values []any        // the elements, when known before the run
	known  bool         // values holds the elements: a binding or a literal array
}

// flow checks the control flow of s.
func (v *validator) flow(s *Step) {
	if s.When != "" {
		v.when(s)
	}
	if s.IsLoop() {
		v.loop(s)
	}
	if l := loopOf(s); l != nil && s.ResultKey != "" {
		is := v.errorf(s, CodeInvalidValue, "result_key %q names one output, but the step runs once per element of for_each %s; put result_key on the for_each step, whose output is the array of them", s.ResultKey, l.ID)
		is.Path += ".result_key"
	}
}

// fieldIssues returns the fail and warn functions of references in field
// (when, for_each) of s.
func (v *validator) fieldIssues(s *Step, field, tmpl string) (fail, warn func(code Code, format string, args ...any) *Issue) {
	at := func(is *Issue) *Issue {
		is.Path += "." + field
		is.Template = tmpl
		return is
	}
	fail = func(code Code, format string, args ...any) *Issue { return at(v.errorf(s, code, format, args...)) }
	warn = func(code Code, format string, args ...any) *Issue { return at(v.warnf(s, code, format, args...)) }
	return fail, warn
}

// wholeRef parses the reference in field of s, which must be one whole
// reference.
func (v *validator) wholeRef(s *Step, field, text, example string, fail func(code Code, format string, args ...any) *Issue) *Ref {
	t, err := v.tmpl.parse(text)
	switch {
	case err != nil:
		fail(CodeBadTemplate, "%v", err)
		return nil
	case t.Kind != Whole:
		fail(CodeInvalidValue, "%s must be one reference, such as %q", field, example)
		return nil
	}
	v.templates++
	return t.Ref
}

// when checks the condition of s: one reference to a value known before s
// starts.
func (v *validator) when(s *Step) {
	fail, warn := v.fieldIssues(s, "when", s.When)
	ref := v.wholeRef(s, "when", s.When, "$check.output.ok", fail)
	if ref == nil {
		return
	}
	if _, ok := v.refNode(s, ref, fail, warn); !ok && len(v.res.Errors) > 0 {
		last := v.res.Errors[len(v.res.Errors)-1]
		if last.Code == CodeFieldNotFound {
			last.Message += "; for a richer condition, compute a boolean with a json_query step and use its result"
		}
	}
}

// loop checks loop l: its array, its variable's name and the iterations
// known before the run.
func (v *validator) loop(l *Step) {
	src := v.source(l)
	if src != nil && src.known && len(src.values) > v.lim.MaxIterations {
		is := v.errorf(l, CodeLimitExceeded, "for_each %s has %d elements; the limit is %d (limits.max_iterations). Loop over fewer: filter or slice the list first", l.ID, len(src.values), v.lim.MaxIterations)
		is.Path += ".for_each"
	}
	for _, name := range []string{l.As, l.As + "_index"} {
		if _, taken := v.byName[name]; taken {
			is := v.errorf(l, CodeDuplicateID, "as %q makes $%s, which is also a step id or result key; choose another name", l.As, name)
			is.Path += ".as"
		}
	}
}

// source returns what is known of the array of loop l, checking it the
// first time; nil when it is no usable array.
func (v *validator) source(l *Step) *loopSource {
	if src, ok := v.loops[l]; ok {
		return src
	}
	if v.loops == nil {
		v.loops = map[*Step]*loopSource{}
	}
	v.loops[l] = nil // a loop whose array refers to its own variable finds nil
	src := v.checkSource(l)
	v.loops[l] = src
	return src
}

func (v *validator) checkSource(l *Step) *loopSource {
	if arr, ok := l.ForEach.([]any); ok {
		if v.containsTemplate(arr) {
			is := v.errorf(l, CodeInvalidValue, "the elements of a for_each array are used as they are, templates too; reference an array instead (\"$list.output.items\"), or build one with a json_query step")
			is.Path += ".for_each"
			return nil
		}
		return knownSource(arr)
	}
	text, _ := l.ForEach.(string)
	fail, warn := v.fieldIssues(l, "for_each", text)
	ref := v.wholeRef(l, "for_each", text, "$list.output.items", fail)
	if ref == nil {
		return nil
	}
	node, ok := v.refNode(l, ref, fail, warn)
	if !ok {
		return nil
	}
	if ref.IsBinding() {
		val, _ := followPath(v.bindings[ref.Binding], ref.Path)
		arr, ok := val.([]any)
		if !ok {
			fail(CodeNotAnArray, "%s is %s, not an array; for_each runs over an array", ref.Canonical(), schemas.TypePhrase(val))
			return nil
		}
		return knownSource(arr)
	}
	if types := node.Types(); !node.Open && len(types) > 0 && !contains(types, "array") {
		fail(CodeNotAnArray, "%s is %s, not an array; for_each runs over an array (reshape the value with a json_query step, e.g. \"[.items[]]\")", ref.Canonical(), typeList(types))
		return nil
	}
	items, err := node.Walk([]Seg{{Index: 0, IsIndex: true}})
	if err != nil {
		items = schemas.Node{Open: true}
	}
	return &loopSource{items: items}
}

func knownSource(arr []any) *loopSource {
	nodes := make([]schemas.Node, 0, len(arr))
	for _, e := range arr {
		nodes = append(nodes, typedNode(schemas.ValueType(e)))
	}
	items := schemas.Node{Open: true}
	if len(nodes) > 0 {
		items = schemas.Union(nodes...)
	}
	return &loopSource{items: items, values: arr, known: true}
}

// varNode returns the node of a loop variable from step s: the element
// ($item, checked against the array's items schema, or against every
// element when they are known) or its index ($item_index).
func (v *validator) varNode(s *Step, ref *Ref, fail func(code Code, format string, args ...any) *Issue) (schemas.Node, bool) {
	for a := s; a != nil && a.parent != nil; a = a.parent {
		l := a.parent
		if l.Do != a {
			continue
		}
		switch ref.Var {
		case l.As + "_index":
			if len(ref.Path) > 0 {
				fail(CodeFieldNotFound, "%s: $%s is the element's index, a number without fields", ref.Canonical(), ref.Var)
				return schemas.Node{}, false
			}
			return typedNode("integer"), true
		case l.As:
			src := v.source(l)
			if src == nil {
				return schemas.Node{Open: true}, true // the array was reported
			}
			if src.known {
				nodes := make([]schemas.Node, 0, len(src.values))
				for i, e := range src.values {
					got, err := followPath(e, ref.Path)
					if err != nil {
						is := fail(CodeFieldNotFound, "%s: in element %d of for_each %s: %v", ref.Canonical(), i, l.ID, err)
						if pe, ok := err.(*PathError); ok {
							is.AvailableFields = pe.Available
							is.Suggestions = suggestField(ref.Path, pe.At, pe.Available)
						}
						return schemas.Node{}, false
					}
					nodes = append(nodes, typedNode(schemas.ValueType(got)))
				}
				if len(nodes) == 0 {
					return schemas.Node{Open: true}, true
				}
				return schemas.Union(nodes...), true
			}
			n, err := src.items.Walk(ref.Path)
			if err != nil {
				we := err.(*schemas.WalkError)
				is := fail(CodeFieldNotFound, "%s: the elements of for_each %s have no such field: %s%s", ref.Canonical(), l.ID, we.Reason, availableHint(we.Available))
				is.AvailableFields = we.Available
				is.Suggestions = suggestField(ref.Path, we.At, we.Available)
				return schemas.Node{}, false
			}
			return n, true
		}
	}
	fail(CodeUnknownRef, "%s is a loop's element, defined only in the do of a for_each whose \"as\" is %q", ref.Text, ref.Var)
	return schemas.Node{}, false
}

// loopOutputNode walks path into the output of loop l: an array with one
// element per iteration, each the output of its body (null when an
// iteration failed with merge all_settled, or was skipped by a condition).
func (v *validator) loopOutputNode(l *Step, path []Seg) (schemas.Node, string, *schemas.WalkError) {
	if len(path) == 0 {
		return typedNode("array"), "", nil
	}
	if !path[0].IsIndex {
		return schemas.Node{}, "", &schemas.WalkError{Reason: fmt.Sprintf("the output of for_each %s is an array, one element per iteration; index it: $%s.output[0]%s", l.ID, l.ID, PathString(path))}
	}
	n, u, err := v.outputNode(l.Do, path[1:])
	if err != nil {
		err.At++
		return schemas.Node{}, "", err
	}
	if len(path) == 1 && (l.Merge == MergeAllSettled || hasWhen(l.Do)) {
		n = schemas.Union(n, typedNode("null"))
	}
	return n, u, nil
}

// conditional warns when s refers to step t, which a condition may skip,
// and s has no condition of its own: s is then skipped too.
func (v *validator) conditional(s, t *Step, ref *Ref, warn func(code Code, format string, args ...any) *Issue) {
	if !hasWhen(t) || hasWhen(s) {
		return
	}
	warn(CodeConditional, "%s refers to step %s, which runs only when its condition (when) holds; when it does not, this step is skipped too. Give this step a when of its own if that is meant", ref.Canonical(), t.ID)
}

// toolCalls checks limits.max_tool_calls when every loop's array is known
// before the run (and no loop is already over max_iterations).
func (v *validator) toolCalls() {
	if len(v.loops) == 0 {
		return
	}
	for _, is := range v.res.Errors {
		if is.Code == CodeLimitExceeded {
			return
		}
	}
	var count func(s *Step) (int, bool)
	count = func(s *Step) (int, bool) {
		if !s.IsGroup() && !s.IsLoop() {
			return 1, true
		}
		n := 0
		for _, c := range s.children() {
			m, ok := count(c)
			if !ok {
				return 0, false
			}
			n += m
		}
		if s.IsLoop() {
			src := v.loops[s]
			if src == nil || !src.known {
				return 0, false
			}
			n *= len(src.values)
		}
		return n, true
	}
	total := 0
	for _, s := range v.plan.Steps {
		n, ok := count(s)
		if !ok {
			return
		}
		total += n
	}
	if total > v.lim.MaxToolCalls {
		v.errorf(nil, CodeLimitExceeded, "the plan makes %d tool calls with its loops; the limit is %d (limits.max_tool_calls). Loop over fewer elements or split the work into several calls", total, v.lim.MaxToolCalls)
	}
}

// hasWhen reports whether s or a step it is in has a condition.
func hasWhen(s *Step) bool {
	for a := s; a != nil; a = a.parent {
		if a.When != "" {
			return true
		}
	}
	return false
}

// loopOf returns the innermost loop whose body s is in, or nil.
func loopOf(s *Step) *Step {
	for a := s; a != nil && a.parent != nil; a = a.parent {
		if a.parent.Do == a {
			return a.parent
		}
	}
	return nil
}

// within reports whether s is in the body of loop l.
func within(s, l *Step) bool {
	for a := s; a != nil; a = a.parent {
		if a == l.Do {
			return true
		}
	}
	return false
}
