package orchestrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/orchestra-mcp/orchestra/internal/suggest"
)

// A plan may say what its result is: "answer", text with ${...}
// references rendered after the run into artifact.answer, and "return", a
// template value resolved into artifact.result. Both are checked at plan
// time like a step's arguments: every reference must name a step of the
// plan (any step: they are read after every step ended) and a field its
// tool's outputSchema has.

// finals validates the plan's answer and return.
func (v *validator) finals() {
	p := v.plan
	if p.Answer != "" {
		v.finalValue(p.Answer, "plan.answer", nil)
	}
	if p.Return != nil {
		v.finalValue(p.Return, "plan.return", make([]Seg, 0, 8))
	}
}

// finalValue checks the templates of one answer or return value at path.
func (v *validator) finalValue(val any, at string, path []Seg) {
	switch val := val.(type) {
	case string:
		if ref, msg, ok := v.bareReference(val); ok {
			v.res.Errors = append(v.res.Errors, &Issue{Path: at + PathString(path), Code: CodeBareReference, Template: ref, Message: msg})
			return
		}
		if !mayBeTemplate(val) {
			return
		}
		t, err := v.tmpl.parse(val)
		if err != nil {
			v.res.Errors = append(v.res.Errors, &Issue{Path: at + PathString(path), Code: CodeBadTemplate, Template: val, Message: err.Error()})
			return
		}
		for _, ref := range t.Refs() {
			v.templates++
			v.finalRef(ref, at+PathString(path))
		}
	case map[string]any:
		for _, k := range sortedKeys(val) {
			v.finalValue(val[k], at, append(path, Seg{Key: k}))
		}
	case []any:
		for i, e := range val {
			v.finalValue(e, at, append(path, Seg{Index: i, IsIndex: true}))
		}
	}
}

// finalRef checks one reference of the answer or return value.
func (v *validator) finalRef(ref *Ref, at string) {
	fail := func(code Code, format string, args ...any) *Issue {
		is := &Issue{Path: at, Code: code, Template: ref.Text, Message: fmt.Sprintf(format, args...)}
		v.res.Errors = append(v.res.Errors, is)
		return is
	}
	if ref.IsBinding() {
		val, ok := v.bindings[ref.Binding]
		if !ok {
			is := fail(CodeUnknownBinding, "binding %q is not in the request's bindings; add it to \"bindings\" or fix the name", ref.Binding)
			is.AvailableFields = sortedKeys(v.bindings)
			return
		}
		if _, err := followPath(val, ref.Path); err != nil {
			fail(CodeFieldNotFound, "in binding %q: %v", ref.Binding, err)
		}
		return
	}
	var t *Step
	if idx, ok := ref.StepIndex(); ok {
		if idx < len(v.plan.Steps) {
			t = v.plan.Steps[idx]
		}
	} else {
		t = v.byName[ref.Step]
	}
	if t == nil {
		is := fail(CodeUnknownRef, "%s refers to %q, which is no step of this plan", ref.Text, ref.Step)
		is.Suggestions = suggest.Closest(ref.Step, sortedKeys(v.byName), 3)
		return
	}
	_, unchecked, werr := v.outputNode(t, ref.Path)
	if werr != nil {
		is := fail(CodeFieldNotFound, "%s: %s%s", ref.Canonical(), werr.Reason, availableHint(werr.Available))
		is.AvailableFields = werr.Available
		is.Suggestions = suggestField(ref.Path, werr.At, werr.Available)
		return
	}
	if unchecked != "" {
		v.res.Warnings = append(v.res.Warnings, &Issue{Path: at, Code: CodeUncheckedRef, Template: ref.Text,
			Message: fmt.Sprintf("%s cannot be checked before the plan runs: %s; a missing field leaves the answer unrendered", ref.Canonical(), unchecked)})
	}
}

// finals renders the plan's answer and resolves its return value into s,
// after every step ended. A reference whose step produced no output (it
// failed, or was skipped) leaves the answer, or the result, unset: the
// caller then writes the answer from the steps instead.
func (r *run) finals(s *snapshot) {
	p := r.plan
	if p == nil || r.req.DryRun || (p.Answer == "" && p.Return == nil) || r.valid == nil || !r.valid.OK() {
		return
	}
	if p.Answer != "" {
		if t, err := r.tmpl.lookup(p.Answer); err == nil {
			if out, err := r.resolveTemplate(t, r.lim.MaxStepOutputBytes); err == nil {
				switch out := out.(type) {
				case string:
					s.answer = out
				default:
					data, _ := json.Marshal(out)
					s.answer = string(data)
				}
			}
		}
	}
	if p.Return != nil {
		if out, err := r.resolveValue(p.Return); err == nil {
			if size, ok := jsonSize(out); ok && size > r.lim.MaxStepOutputBytes {
				out = truncationMarker(out, size, r.lim.MaxStepOutputBytes)
			}
			s.result = out
		}
	}
}

// errNoValue ends the resolution of a return value that cannot be made.
var errNoValue = errors.New("no value")

// resolveValue resolves the templates in a JSON value.
func (r *run) resolveValue(v any) (any, error) {
	switch v := v.(type) {
	case string:
		if !mayBeTemplate(v) {
			return v, nil
		}
		t, err := r.tmpl.lookup(v)
		if err != nil {
			return nil, err
		}
		return r.resolveTemplate(t, r.lim.MaxStepOutputBytes)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			x, err := r.resolveValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			x, err := r.resolveValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case nil:
		return nil, errNoValue
	}
	return v, nil
}

// NeededOutputs returns what an answer must be written from, when the plan
// gives no answer of its own: the result when there is one, or else the
// outputs no later step consumed (the ends of the plan's data flow), by
// step id. Steps without output are left out.
func (e *Envelope) NeededOutputs() map[string]any {
	a := e.Artifact
	if a.Result != nil {
		return map[string]any{"result": a.Result}
	}
	consumed := map[string]bool{}
	if a.Plan != nil {
		for _, s := range a.Plan.All() {
			forEachRef(s.Arguments, func(r *Ref) {
				if !r.IsBinding() {
					consumed[r.Step] = true
				}
			})
		}
	}
	out := map[string]any{}
	var last *StepRecord
	var walk func(rs []*StepRecord, top, groupUsed bool)
	walk = func(rs []*StepRecord, top, groupUsed bool) {
		for _, rec := range rs {
			used := groupUsed || consumed[rec.ID] || (rec.ResultKey != "" && consumed[rec.ResultKey]) || (top && consumed[strconv.Itoa(rec.Index)])
			if len(rec.Children) > 0 {
				walk(rec.Children, false, used)
				continue
			}
			if rec.Output == nil {
				continue
			}
			last = rec
			if !used {
				out[rec.ID] = rec.Output
			}
		}
	}
	walk(a.Steps, true, false)
	if len(out) == 0 && last != nil {
		out[last.ID] = last.Output
	}
	return out
}

// full reports whether the run's caller gets the whole envelope.
func (r *run) full() bool {
	mode := r.req.Response
	if mode == "" {
		mode = r.e.opts.Response
	}
	return mode == ResponseFull
}
