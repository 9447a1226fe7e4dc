package nestful

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// seg is one step of a path into a tool's output: a field or an index.
type seg struct {
	Field   string
	Index   int
	IsIndex bool
}

func pathString(path []seg) string {
	var b strings.Builder
	for _, s := range path {
		if s.IsIndex {
			fmt.Fprintf(&b, "[%d]", s.Index)
		} else {
			b.WriteByte('.')
			b.WriteString(s.Field)
		}
	}
	return b.String()
}

// ref is a reference to an earlier step's output.
type ref struct {
	ID   string
	Path []seg
}

// part is a piece of a string argument: literal text or a reference.
type part struct {
	Lit string
	Ref *ref
}

// nestfulRef matches one NESTFUL reference: $label.field[0].field$. Field
// names may contain spaces ("$var1.Exchange Rate$").
var nestfulRef = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_-]*)((?:\.[^.$\[\]]+|\[[0-9]+\])*)\$`)

var pathSeg = regexp.MustCompile(`\.([^.$\[\]]+)|\[([0-9]+)\]`)

func parsePath(p string) []seg {
	var out []seg
	for _, m := range pathSeg.FindAllStringSubmatch(p, -1) {
		if m[1] != "" {
			out = append(out, seg{Field: m[1]})
		} else {
			i, _ := strconv.Atoi(m[2])
			out = append(out, seg{Index: i, IsIndex: true})
		}
	}
	return out
}

// splitNestful splits s into literal text and NESTFUL references. A string
// without references is one literal part.
func splitNestful(s string) []part {
	var parts []part
	last := 0
	for _, m := range nestfulRef.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			parts = append(parts, part{Lit: s[last:m[0]]})
		}
		parts = append(parts, part{Ref: &ref{ID: s[m[2]:m[3]], Path: parsePath(s[m[4]:m[5]])}})
		last = m[1]
	}
	if last < len(s) || len(parts) == 0 {
		parts = append(parts, part{Lit: s[last:]})
	}
	return parts
}

// Orchestra template syntax: $id.output.path as a whole string, ${id.output.path}
// inside a longer one.
var (
	wholeTemplate  = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_-]*)\.output((?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*)$`)
	interpTemplate = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_-]*)\.output((?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*)\}`)
)

func (r ref) whole() string  { return "$" + r.ID + ".output" + pathString(r.Path) }
func (r ref) interp() string { return "${" + r.ID + ".output" + pathString(r.Path) + "}" }

// tmplRef is a template found in a plan string.
type tmplRef struct {
	ref
	Text         string // the template's text as it appears in the string
	Interpolated bool
}

// findTemplates returns the orchestra templates in s: one whole-string
// template, or the ${...} interpolations of a longer string. A string
// starting with $$ is literal.
func findTemplates(s string) []tmplRef {
	if strings.HasPrefix(s, "$$") {
		return nil
	}
	if m := wholeTemplate.FindStringSubmatch(s); m != nil {
		return []tmplRef{{ref: ref{ID: m[1], Path: parsePath(m[2])}, Text: s}}
	}
	var out []tmplRef
	for _, m := range interpTemplate.FindAllStringSubmatch(s, -1) {
		out = append(out, tmplRef{ref: ref{ID: m[1], Path: parsePath(m[2])}, Text: m[0], Interpolated: true})
	}
	return out
}
