package orchestrate

import (
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// The structure check of a step's arguments that hold templates: the
// literal parts are checked against the tool's input schema, the templated
// ones by type (validate.go).

// structure checks templated arguments: required and unknown arguments, and
// every literal part against its schema.
func (v *validator) structure(s *Step, n schemas.Node, val any, path []Seg) {
	if !v.containsTemplate(val) {
		if err, ok := n.Validate(val); ok && err != nil {
			v.argIssue(s, path, CodeInvalidArguments, "%s does not match the input schema of %q: %s", argName(path), s.Tool, schemas.CleanError(err))
		}
		return
	}
	switch val := val.(type) {
	case map[string]any:
		names, closed := n.Properties()
		for _, req := range n.Required() {
			if _, ok := val[req]; !ok {
				is := v.argIssue(s, path, CodeInvalidArguments, "%q requires argument %q", s.Tool, strings.TrimPrefix(PathString(appendSeg(path, Seg{Key: req})), "."))
				if len(path) == 0 {
					is.Argument = req
				}
			}
		}
		// path is used as a stack: issues keep only its text.
		for _, k := range sortedKeys(val) {
			child := append(path, Seg{Key: k})
			if closed && !contains(names, k) {
				is := v.argIssue(s, child, CodeInvalidArguments, "%q takes no argument %q", s.Tool, argName(child))
				is.AvailableFields = names
				is.Suggestions = suggest.Closest(k, names, 3)
				continue
			}
			cn, err := n.Walk([]Seg{{Key: k}})
			if err != nil {
				continue
			}
			v.structure(s, cn, val[k], child)
		}
	case []any:
		for i, e := range val {
			cn, err := n.Walk([]Seg{{Index: i, IsIndex: true}})
			if err != nil {
				continue
			}
			v.structure(s, cn, e, append(path, Seg{Index: i, IsIndex: true}))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// containsTemplate reports whether any string in v is a template.
func (v *validator) containsTemplate(val any) bool {
	switch val := val.(type) {
	case string:
		if !mayBeTemplate(val) {
			return false
		}
		t, err := v.tmpl.parse(val)
		return err != nil || t.Kind != Literal
	case map[string]any:
		for _, e := range val {
			if v.containsTemplate(e) {
				return true
			}
		}
	case []any:
		for _, e := range val {
			if v.containsTemplate(e) {
				return true
			}
		}
	}
	return false
}
