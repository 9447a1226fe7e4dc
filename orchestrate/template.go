package orchestrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/orchestra-mcp/orchestra/schemas"
)

// A template string refers to the output of an earlier step or to a binding:
//
//	$0.output.sources[0].url     whole value: the referenced value, JSON type kept
//	$research.output.title       the same, by step id or result key
//	$bindings.user.name          a request binding
//	"Title: ${research.output.title} (${0.output.count})"   interpolation
//	"$$5"                        a literal "$5"
//
// ParseTemplate is the one parser behind validation and resolution.

// Seg is one segment of a path: a key (.field or ["field"]) or an index ([i]).
type Seg = schemas.Seg

func segString(s Seg) string {
	if s.IsIndex {
		return "[" + strconv.Itoa(s.Index) + "]"
	}
	if isPathKey(s.Key) {
		return "." + s.Key
	}
	b, _ := json.Marshal(s.Key)
	return "[" + string(b) + "]"
}

// PathString renders a path the way templates write it.
func PathString(path []Seg) string {
	var b strings.Builder
	for _, s := range path {
		b.WriteString(segString(s))
	}
	return b.String()
}

// Ref is one reference: to a step's output or to a binding.
type Ref struct {
	// Step is the step reference: a top-level index ("0") or an id or
	// result key. Empty for a binding reference.
	Step string
	// Binding names the binding for a $bindings reference.
	Binding string
	// Var names a loop variable ($item, $item_index) for a reference to
	// the element a loop's body runs for.
	Var string
	// Path leads into the referenced value.
	Path []Seg
	// Text is the reference as written, e.g. "$0.output.x" or "${0.output.x}".
	Text string
}

// IsBinding reports whether r refers to a request binding.
func (r *Ref) IsBinding() bool { return r.Step == "" && r.Var == "" }

// StepIndex returns the top-level index r names, if it names one by index.
func (r *Ref) StepIndex() (int, bool) {
	if r.Step == "" || r.Step[0] < '0' || r.Step[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(r.Step)
	if err != nil {
		// Too large for an int: an index past the end of any plan.
		return math.MaxInt, true
	}
	return n, true
}

// Canonical renders r in its whole-value form, without interpolation braces.
func (r *Ref) Canonical() string {
	if r.Var != "" {
		return "$" + r.Var + PathString(r.Path)
	}
	if r.IsBinding() {
		return "$bindings." + r.Binding + PathString(r.Path)
	}
	return "$" + r.Step + ".output" + PathString(r.Path)
}

// TemplateKind says what a string argument is.
type TemplateKind int

const (
	// Literal strings are passed as they are.
	Literal TemplateKind = iota
	// Whole strings are exactly one reference and are replaced by its value.
	Whole
	// Interpolated strings contain ${...} references inside other text.
	Interpolated
)

// Part is a piece of an interpolated string: text, or a reference.
type Part struct {
	Text string
	Ref  *Ref
}

// Template is a parsed string argument.
type Template struct {
	Kind    TemplateKind
	Literal string // for Literal: the string value ($$ unescaped)
	Ref     *Ref   // for Whole
	Parts   []Part // for Interpolated
}

// Refs returns the references in t.
func (t *Template) Refs() []*Ref {
	switch t.Kind {
	case Whole:
		return []*Ref{t.Ref}
	case Interpolated:
		var refs []*Ref
		for _, p := range t.Parts {
			if p.Ref != nil {
				refs = append(refs, p.Ref)
			}
		}
		return refs
	}
	return nil
}

// PathError says where following a path into a value failed.
type PathError struct {
	At        int // index of the failing segment
	Reason    string
	Available []string
}

func (e *PathError) Error() string { return e.Reason }

// followPath walks path into v.
func followPath(v any, path []Seg) (any, error) {
	for i, seg := range path {
		if seg.IsIndex {
			arr, ok := v.([]any)
			if !ok {
				return nil, &PathError{At: i, Reason: fmt.Sprintf("cannot index %s with %s: it is %s, not an array", PathString(path[:i]), segString(seg), schemas.TypePhrase(v))}
			}
			if seg.Index >= len(arr) {
				return nil, &PathError{At: i, Reason: fmt.Sprintf("index %s is out of range: %s has %d elements", segString(seg), orRoot(PathString(path[:i])), len(arr))}
			}
			v = arr[seg.Index]
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, &PathError{At: i, Reason: fmt.Sprintf("cannot read field %q of %s: it is %s, not an object", seg.Key, orRoot(PathString(path[:i])), schemas.TypePhrase(v))}
		}
		next, ok := obj[seg.Key]
		if !ok {
			return nil, &PathError{At: i, Reason: fmt.Sprintf("field %q does not exist in %s", seg.Key, orRoot(PathString(path[:i]))), Available: sortedKeys(obj)}
		}
		v = next
	}
	return v, nil
}

func orRoot(p string) string {
	if p == "" {
		return "the output"
	}
	return p
}

// templateCache holds the parsed templates of one plan's strings, so that
// validation, preparation and resolution parse each string once. It is
// filled before a plan's steps start; from then on it is only read, which
// is safe from the steps' goroutines. The plan's loop variables are parsed
// as references ($item.path); a zero cache parses every time, without them.
type templateCache struct {
	m    map[string]parsedTemplate
	vars map[string]bool
}

// newTemplateCache returns a cache with room for the strings of p that may
// be templates, so that filling it never regrows it.
func newTemplateCache(p *Plan) templateCache {
	n := 0
	var count func(v any)
	count = func(v any) {
		switch v := v.(type) {
		case string:
			if mayBeTemplate(v) {
				n++
			}
		case map[string]any:
			for _, e := range v {
				count(e)
			}
		case []any:
			for _, e := range v {
				count(e)
			}
		}
	}
	for _, s := range p.All() {
		count(s.Arguments)
		count(s.When)
		count(s.ForEach)
	}
	return templateCache{m: make(map[string]parsedTemplate, n), vars: p.loopVars()}
}

type parsedTemplate struct {
	t   *Template
	err error
}

// parse parses s, or returns what an earlier call parsed. A nil cache
// parses every time.
func (c templateCache) parse(s string) (*Template, error) {
	if p, ok := c.m[s]; ok {
		return p.t, p.err
	}
	t, err := parseTemplate(s, c.vars)
	if c.m != nil {
		c.m[s] = parsedTemplate{t, err}
	}
	return t, err
}

// lookup is parse without storing: for use while steps run.
func (c templateCache) lookup(s string) (*Template, error) {
	if p, ok := c.m[s]; ok {
		return p.t, p.err
	}
	return parseTemplate(s, c.vars)
}

// Resolution: while steps run, the templates of a step's arguments are
// replaced by the values they refer to.

// lookupRef returns the step ref names, or nil.
func (r *run) lookupRef(ref *Ref) *Step {
	if idx, ok := ref.StepIndex(); ok {
		if idx < len(r.plan.Steps) {
			return r.plan.Steps[idx]
		}
		return nil
	}
	return r.names[ref.Step]
}

// forEachRef calls f for every reference in the templates of v.
func forEachRef(v any, f func(*Ref)) { templateCache{}.forEachRef(v, f) }

// forEachRef calls f for every reference in the templates of v, parsing
// each string once.
func (c templateCache) forEachRef(v any, f func(*Ref)) {
	switch v := v.(type) {
	case string:
		if !mayBeTemplate(v) {
			return
		}
		if t, err := c.parse(v); err == nil {
			switch t.Kind {
			case Whole:
				f(t.Ref)
			case Interpolated:
				for _, p := range t.Parts {
					if p.Ref != nil {
						f(p.Ref)
					}
				}
			}
		}
	case map[string]any:
		for _, e := range v {
			c.forEachRef(e, f)
		}
	case []any:
		for _, e := range v {
			c.forEachRef(e, f)
		}
	}
}

// resolveArgs resolves the templates in the arguments of s, within
// limits.max_argument_bytes: the budget is kept while resolving, so that a
// value referenced a thousand times fails the step before it is copied
// once too often.
func (r *run) resolveArgs(s *Step) (map[string]any, *Error) {
	var fail *Error
	room := r.lim.MaxArgumentBytes
	tooLarge := func(path []Seg) *Error {
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf("the arguments resolve to more than %s of JSON (limits.max_argument_bytes), passing the limit at argument %s; "+
			"pass less: select the fields the tool needs with json_query, or reference a value once", formatBytes(int64(r.lim.MaxArgumentBytes)), argName(path))}
	}
	// path is used as a stack; it is read only to name a failing argument.
	var resolve func(v any, path []Seg) any
	resolve = func(v any, path []Seg) any {
		if fail != nil {
			return nil
		}
		switch v := v.(type) {
		case string:
			if !mayBeTemplate(v) {
				if room -= len(v); room < 0 {
					fail = tooLarge(path)
				}
				return v
			}
			t, err := r.tmpl.lookup(v)
			if err != nil {
				fail = &Error{Code: CodeTemplateError, Message: err.Error()}
				return nil
			}
			out, err := r.resolveTemplateIn(s, t, room)
			var big *errTooLarge
			if errors.As(err, &big) {
				fail = tooLarge(path)
				return nil
			}
			if err != nil {
				fail = &Error{Code: CodeTemplateError, Message: fmt.Sprintf("argument %s: %v", argName(path), err)}
				return nil
			}
			if n, ok := jsonSizeWithin(out, room); ok {
				if room -= n; room < 0 {
					fail = tooLarge(path)
				}
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = resolve(e, append(path, Seg{Key: k}))
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = resolve(e, append(path, Seg{Index: i, IsIndex: true}))
			}
			return out
		}
		return v
	}
	var stack [8]Seg
	args := resolve(s.Arguments, stack[:0])
	if fail != nil {
		return nil, fail
	}
	if err := r.bytes.charge(s.ID, int64(r.lim.MaxArgumentBytes-room)); err != nil {
		return nil, err
	}
	m, _ := args.(map[string]any)
	return m, nil
}

// resolveTemplate resolves t; an interpolated string longer than room
// fails with *errTooLarge before it is built.
func (r *run) resolveTemplate(t *Template, room int) (any, error) {
	return r.resolveTemplateIn(nil, t, room)
}

// resolveTemplateIn resolves t in the templates of step s, where the
// variables of the loops s runs in are defined.
func (r *run) resolveTemplateIn(s *Step, t *Template, room int) (any, error) {
	switch t.Kind {
	case Literal:
		return t.Literal, nil
	case Whole:
		return r.resolveRefIn(s, t.Ref)
	}
	var b []byte
	for _, p := range t.Parts {
		if p.Ref == nil {
			b = append(b, p.Text...)
			continue
		}
		v, err := r.resolveRefIn(s, p.Ref)
		if err != nil {
			return nil, err
		}
		if s, ok := v.(string); ok {
			if len(b)+len(s) > room {
				return nil, &errTooLarge{room}
			}
			b = append(b, s...)
			continue
		}
		if n, ok := jsonSizeWithin(v, room-len(b)); ok && len(b)+n > room {
			return nil, &errTooLarge{room}
		}
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Ref.Text, err)
		}
		b = append(b, data...)
	}
	return string(b), nil
}

func (r *run) resolveRef(ref *Ref) (any, error) { return r.resolveRefIn(nil, ref) }

// resolveRefIn resolves ref in the templates of step s.
func (r *run) resolveRefIn(s *Step, ref *Ref) (any, error) {
	var root any
	if ref.Var != "" {
		v, ok := loopVar(s, ref.Var)
		if !ok {
			return nil, fmt.Errorf("%s: $%s is defined only in the do of a for_each", ref.Text, ref.Var)
		}
		root = v
	} else if ref.IsBinding() {
		v, ok := r.req.Bindings[ref.Binding]
		if !ok {
			return nil, fmt.Errorf("%s: no binding %q", ref.Text, ref.Binding)
		}
		root = v
	} else {
		t := r.lookupRef(ref)
		if t == nil {
			return nil, fmt.Errorf("%s: no such step", ref.Text)
		}
		r.mu.Lock()
		v, ok := r.outputs[t]
		r.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%s: step %s produced no output", ref.Text, t.ID)
		}
		root = v
	}
	v, err := followPath(root, ref.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Text, err)
	}
	return v, nil
}
