package orchestrate

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// TemplateError is a malformed template.
type TemplateError struct {
	Text   string
	Offset int
	Reason string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("malformed template %q at offset %d: %s", e.Text, e.Offset, e.Reason)
}

// mayBeTemplate reports whether s needs parsing at all: the fast path for
// plain strings.
func mayBeTemplate(s string) bool {
	return strings.HasPrefix(s, "$") || strings.Contains(s, "${")
}

// ParseTemplate parses a string argument.
//
// A string is a whole-value template only when all of it is one reference;
// "$5 dollars" is plain text. Inside longer strings, ${...} interpolates and a
// "${" that does not hold a well-formed reference is an error, so a typo is
// never silently sent to a tool. "$$" at the start of a string is a literal
// "$", and "$${" anywhere a literal "${".
func ParseTemplate(s string) (*Template, error) { return parseTemplate(s, nil) }

// parseTemplate is ParseTemplate with the loop variables in scope: "$item"
// and "${item.path}" are references when vars holds "item".
func parseTemplate(s string, vars map[string]bool) (*Template, error) {
	if !mayBeTemplate(s) {
		return &Template{Kind: Literal, Literal: s}, nil
	}
	if strings.HasPrefix(s, "$$") {
		return &Template{Kind: Literal, Literal: s[1:]}, nil
	}
	if strings.HasPrefix(s, "$") && !strings.HasPrefix(s, "${") {
		// One allocation holds the template, its reference and a short path.
		w := &struct {
			t   Template
			r   Ref
			seg [2]Seg
		}{}
		if n, err := parseRef(&w.r, w.seg[:0], s, 1, vars); err == nil && n == len(s) {
			w.r.Text = s
			w.t = Template{Kind: Whole, Ref: &w.r}
			return &w.t, nil
		}
	}
	count := strings.Count(s, "${")
	if count == 0 {
		return &Template{Kind: Literal, Literal: s}, nil
	}
	parts := make([]Part, 0, 2*count+1)
	refs := make([]Ref, count)
	segs := make([]Seg, 2*count) // room for two path segments per reference
	// The text between references is a substring of s unless a "$${"
	// escape joins pieces; only then are bytes copied.
	var lit string
	var joined []byte
	addText := func(t string) {
		switch {
		case joined != nil:
			joined = append(joined, t...)
		case lit == "":
			lit = t
		default:
			joined = append(append(make([]byte, 0, len(lit)+len(t)+16), lit...), t...)
		}
	}
	endText := func() {
		switch {
		case joined != nil:
			parts = append(parts, Part{Text: string(joined)})
		case lit != "":
			parts = append(parts, Part{Text: lit})
		}
		lit, joined = "", nil
	}
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "${")
		if j < 0 {
			addText(s[i:])
			break
		}
		if j > 0 && s[i+j-1] == '$' {
			// "$${" is a literal "${", here as at the start.
			addText(s[i : i+j-1])
			addText("${")
			i += j + 2
			continue
		}
		addText(s[i : i+j])
		start := i + j
		end := strings.IndexByte(s[start:], '}')
		if end < 0 {
			return nil, &TemplateError{Text: s, Offset: start, Reason: `"${" is not closed by "}"; write "$${" for a literal "${"`}
		}
		end += start
		k := count - len(refs)
		ref := &refs[0]
		refs = refs[1:]
		n, err := parseRef(ref, segs[2*k:2*k:2*k+2], s[:end], start+2, vars)
		if err != nil {
			return nil, &TemplateError{Text: s, Offset: start, Reason: err.Error()}
		}
		if n != end {
			return nil, &TemplateError{Text: s, Offset: n, Reason: fmt.Sprintf("unexpected %q in reference %q; a reference is ${N.output.path}, ${id.output.path} or ${bindings.name.path}", s[n:end], s[start:end+1])}
		}
		ref.Text = s[start : end+1]
		endText()
		parts = append(parts, Part{Ref: ref})
		i = end + 1
	}
	endText()
	if len(refs) == count {
		// No reference, only escaped "$${": plain text.
		text := ""
		if len(parts) > 0 {
			text = parts[0].Text
		}
		return &Template{Kind: Literal, Literal: text}, nil
	}
	return &Template{Kind: Interpolated, Parts: parts}, nil
}

// parseRef parses into ref a reference without its leading "$" or "${"
// starting at s[i], appending its path to path, and returns the offset just
// past it.
func parseRef(ref *Ref, path []Seg, s string, i int, vars map[string]bool) (int, error) {
	name, i := scanName(s, i)
	if name == "" {
		return i, fmt.Errorf("expected a step index, a step id or \"bindings\" after \"$\"")
	}
	if vars[name] {
		ref.Var = name
	} else if name == "bindings" {
		if i >= len(s) || s[i] != '.' {
			return i, fmt.Errorf("expected \".name\" after \"bindings\"")
		}
		b, j := scanName(s, i+1)
		if b == "" || !isIdent(b) {
			return i + 1, fmt.Errorf("expected a binding name after \"bindings.\"")
		}
		ref.Binding, i = b, j
	} else {
		if !isIdent(name) && !isIndex(name) {
			return i, fmt.Errorf("%q is neither a step index nor a step id", name)
		}
		if !strings.HasPrefix(s[i:], ".output") || (len(s) > i+7 && isNameByte(s[i+7])) {
			return i, fmt.Errorf("expected \".output\" after \"$%s\"", name)
		}
		ref.Step, i = name, i+7
	}
	path, i, err := parsePath(path, s, i)
	if err != nil {
		return i, err
	}
	ref.Path = path
	return i, nil
}

// parsePath appends to path the .key, ["key"] and [i] segments of s[i:]
// until something else starts.
func parsePath(path []Seg, s string, i int) ([]Seg, int, error) {
	for i < len(s) {
		switch s[i] {
		case '.':
			key, j := scanName(s, i+1)
			if key == "" {
				return nil, i, fmt.Errorf("expected a field name after \".\"")
			}
			path = append(path, Seg{Key: key})
			i = j
		case '[':
			if i+1 < len(s) && s[i+1] == '"' {
				end := strings.Index(s[i+1:], `"]`)
				if end < 0 {
					return nil, i, fmt.Errorf(`expected "\"]" to close a quoted key`)
				}
				var key string
				if err := json.Unmarshal([]byte(s[i+1:i+2+end]), &key); err != nil {
					return nil, i, fmt.Errorf("bad quoted key: %v", err)
				}
				path = append(path, Seg{Key: key})
				i += end + 3
				continue
			}
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, i, fmt.Errorf("expected \"]\" to close an index")
			}
			if !isIndex(s[i+1 : i+end]) {
				return nil, i, fmt.Errorf("index %q is not a non-negative integer", s[i+1:i+end])
			}
			n, err := strconv.Atoi(s[i+1 : i+end])
			if err != nil {
				n = math.MaxInt // past the end of any array
			}
			path = append(path, Seg{Index: n, IsIndex: true})
			i += end + 1
		default:
			return path, i, nil
		}
	}
	return path, i, nil
}

func scanName(s string, i int) (string, int) {
	j := i
	for j < len(s) && isNameByte(s[j]) {
		j++
	}
	return s[i:j], j
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// BindingName returns s made a name a plan can read as $bindings.<name>:
// each byte a name cannot hold becomes "_", and "_" goes before a first
// byte that cannot start one (a digit, "-").
func BindingName(s string) string {
	if isIdent(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !isNameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) == 0 || !isIdent(string(b[:1])) {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// isIdent reports whether s is a valid step id or result key:
// [A-Za-z_][A-Za-z0-9_-]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

// isIndex reports whether s is a step or array index: digits without a
// leading zero. Any length counts: "$999999999999999999999.output" is an
// index past the end of the plan (unknown_ref), never plain text.
func isIndex(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isPathKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

// looksLikeTemplate reports whether a literal string was probably meant as
// a template: "$research.title" (no .output), "$0.outputs.x".
func looksLikeTemplate(s string) (name string, ok bool) {
	if !strings.HasPrefix(s, "$") || strings.HasPrefix(s, "$$") || strings.HasPrefix(s, "${") {
		return "", false
	}
	name, i := scanName(s, 1)
	if name == "" || i >= len(s) || (s[i] != '.' && s[i] != '[') {
		return "", false
	}
	return name, true
}

// bareReference returns the first reference in s that is written as a
// whole-value reference ("$a.output.text") but is not the whole string,
// where only ${...} interpolates: "Summary: $a.output.text" passes the
// reference on as plain text. It counts only references to what known
// says is a step of the plan, to the bindings, or to a loop variable (in
// vars): "costs $5" and "$0.50" are text. A string that is one reference
// as a whole, the inside of ${...}, and a "$" next to another "$" are not
// bare references.
func bareReference(s string, vars map[string]bool, known func(step string) bool) (string, bool) {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '$':
			continue
		case strings.HasPrefix(s[i:], "${"):
			if end := strings.IndexByte(s[i:], '}'); end > 0 {
				i += end
			}
			continue
		case i+1 < len(s) && s[i+1] == '$' || i > 0 && s[i-1] == '$':
			continue
		}
		var r Ref
		// A path that goes wrong ("$a.output.title." ending a sentence)
		// still names what it refers to up to where it does.
		n, err := parseRef(&r, nil, s, i+1, vars)
		if err == nil && i == 0 && n == len(s) {
			continue
		}
		if r.Var != "" || r.Binding != "" || r.Step != "" && known(r.Step) {
			return s[i:n], true
		}
	}
	return "", false
}

// mustachePlaceholder returns the name in the first Mustache-style
// placeholder of s, "{{name}}": a bare identifier that is neither a Go
// template keyword nor one of its built-in functions. orchestra passes it
// as plain text, and render's Go templates read it as a call of an
// undefined function.
func mustachePlaceholder(s string) (string, bool) {
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			return "", false
		}
		s = s[i+2:]
		j := strings.Index(s, "}}")
		if j < 0 {
			return "", false
		}
		name := strings.TrimSpace(s[:j])
		if isIdent(name) && !goTemplateWords[name] {
			return name, true
		}
		s = s[j+2:]
	}
}

// goTemplateWords are the identifiers a Go template may hold alone.
var goTemplateWords = map[string]bool{
	"end": true, "else": true, "break": true, "continue": true, "nil": true,
	"and": true, "or": true, "not": true, "len": true, "index": true, "slice": true, "call": true,
	"print": true, "printf": true, "println": true, "html": true, "js": true, "urlquery": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
}
