package orchestrate

import (
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// The structure check of a step's arguments that hold templates: the
// literal parts are checked against the tool's input schema, the templated
// ones by type (validate.go).

// structure checks a step's arguments against the tool's input schema and
// reports every problem, not only the first, so that one repair fixes them
// all: required and unknown arguments, and each value on its own. The
// literal parts are checked against their schemas; templated ones are
// type-checked elsewhere.
func (v *validator) structure(s *Step, n schemas.Node, val any, path []Seg) {
	if !v.containsTemplate(val) {
		v.literal(s, n, val, path)
		return
	}
	v.members(s, n, val, path)
}

// literal checks a value without templates against its schema: when it
// does not match, each member is checked on its own so that every problem
// is reported; a problem of the value as a whole (a oneOf, minProperties...)
// is reported as it is.
func (v *validator) literal(s *Step, n schemas.Node, val any, path []Seg) {
	err, ok := n.Validate(val)
	if !ok || err == nil {
		return
	}
	before := len(v.res.Errors)
	switch val.(type) {
	case map[string]any, []any:
		v.members(s, n, val, path)
	}
	if len(v.res.Errors) > before {
		return
	}
	if len(path) == 0 {
		v.argIssue(s, path, CodeInvalidArguments, "arguments do not match the input schema of %q: %s", s.Tool, schemas.CleanError(err))
		return
	}
	v.argIssue(s, path, CodeInvalidArguments, "%s does not match the input schema of %q: %s", argName(path), s.Tool, schemas.CleanError(err))
}

// members checks the members of an object or array: required and unknown
// properties, and each member with structure.
func (v *validator) members(s *Step, n schemas.Node, val any, path []Seg) {
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
