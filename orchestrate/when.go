package orchestrate

import "fmt"

// A step with "when" runs only when the value its template refers to is
// truthy: not null, false, 0, "", [] or {}. Otherwise it is skipped with
// the reason condition_false, and so are the steps that need its output:
// a skipped condition is no failure, and the plan can still succeed.

// truthy reports whether a condition's value lets its step run.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// admit decides, as s is about to start, whether it runs: it returns why
// not, or nil. A step does not run when a step it refers to was skipped by
// a condition (its own or its group's), or when its own condition is
// false. A condition whose value is missing (the step it reads produced no
// output, the field is absent) is false.
func (r *run) admit(s *Step) *Error {
	skipped, off, v := r.condition(s)
	switch {
	case skipped != nil:
		return &Error{StepID: s.ID, Code: CodeConditionFalse, Message: fmt.Sprintf("not run: step %s, whose output it needs, was skipped because a condition was false", skipped.ID)}
	case off:
		return &Error{StepID: s.ID, Code: CodeConditionFalse, Message: fmt.Sprintf("not run: when %s is %s", s.When, compactJSON(v))}
	}
	return nil
}

// runs is admit without the reason: a loop's iteration that does not run
// has no record to hold one.
func (r *run) runs(s *Step) bool {
	skipped, off, _ := r.condition(s)
	return skipped == nil && !off
}

// condition returns the step s refers to that a condition skipped, if
// any, else whether its own condition is false, with the condition's
// value.
func (r *run) condition(s *Step) (skipped *Step, off bool, v any) {
	if t := r.skippedRef(s); t != nil {
		return t, false, nil
	}
	if s.When == "" {
		return nil, false, nil
	}
	t, err := r.tmpl.lookup(s.When)
	if err != nil || t.Kind != Whole {
		return nil, false, nil // refused at plan time
	}
	v, err = r.resolveRefIn(s, t.Ref)
	if err != nil {
		v = nil
	}
	return nil, !truthy(v), v
}

// compactJSON renders a small falsy value the way JSON writes it.
func compactJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(v)
	case float64:
		return fmt.Sprint(v)
	case string:
		return `""`
	case []any:
		return "[]"
	case map[string]any:
		return "{}"
	}
	return fmt.Sprint(v)
}

// skippedRef returns a step that s (its arguments, when and for_each)
// refers to and that was skipped by a condition, or nil.
func (r *run) skippedRef(s *Step) *Step {
	var found *Step
	check := func(ref *Ref) {
		if found != nil || ref.IsBinding() || ref.Var != "" {
			return
		}
		t := r.lookupRef(ref)
		r.mu.Lock()
		defer r.mu.Unlock()
		for a := t; a != nil; a = a.parent {
			if rec := r.records[a]; rec != nil && rec.Status == StatusSkipped && rec.Reason != nil {
				found = t
				return
			}
		}
	}
	r.tmpl.forEachRef(s.Arguments, check)
	r.tmpl.forEachRef(s.When, check)
	r.tmpl.forEachRef(s.ForEach, check)
	return found
}

// skipFor ends s, and what is in it, as skipped for reason why.
func (r *run) skipFor(s *Step, why *Error) {
	r.mu.Lock()
	r.records[s].Reason = why
	r.mu.Unlock()
	r.skip(s, nil)
}
