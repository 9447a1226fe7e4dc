package nestful

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// mapType maps a spec's type string to JSON Schema types. It reports false
// for a type string it does not understand. The items schema is set for
// parameterised list types such as "list[str]".
func mapType(t any) (types []string, items *jsonschema.Schema, ok bool) {
	switch t := t.(type) {
	case nil:
		return nil, nil, true
	case []any: // ["string", "number"]
		for _, e := range t {
			ts, _, ok := mapType(e)
			if !ok {
				return nil, nil, false
			}
			types = addTypes(types, ts...)
		}
		return types, nil, true
	case string:
		s := strings.ToLower(strings.TrimSpace(t))
		// Unions: "string|number", "string or number", "Union[str, int]", "Optional[str]".
		for _, p := range []string{"union[", "optional["} {
			if strings.HasPrefix(s, p) && strings.HasSuffix(s, "]") {
				inner := s[len(p) : len(s)-1]
				var parts []any
				for _, x := range splitTop(inner, ',') {
					parts = append(parts, x)
				}
				if p == "optional[" {
					parts = append(parts, "null")
				}
				return mapType(parts)
			}
		}
		if strings.Contains(s, "|") || strings.Contains(s, " or ") {
			var parts []any
			for _, x := range strings.FieldsFunc(strings.ReplaceAll(s, " or ", "|"), func(r rune) bool { return r == '|' }) {
				parts = append(parts, x)
			}
			return mapType(parts)
		}
		// Parameterised containers: list[str], array<number>, dict[str, int].
		if i := strings.IndexAny(s, "[<"); i > 0 && (strings.HasSuffix(s, "]") || strings.HasSuffix(s, ">")) {
			base, inner := s[:i], s[i+1:len(s)-1]
			bt, _, ok := mapType(base)
			if !ok || len(bt) != 1 {
				return nil, nil, false
			}
			if bt[0] == "array" {
				it, itItems, ok := mapType(inner)
				if !ok {
					return nil, nil, false
				}
				items = &jsonschema.Schema{Items: itItems}
				setTypes(items, it)
				return bt, items, true
			}
			return bt, nil, true
		}
		switch s {
		case "", "any", "none", "mixed", "*":
			return nil, nil, true
		case "string", "str", "text", "enum", "file", "date", "datetime", "time", "url", "uri", "email":
			return []string{"string"}, nil, true
		case "number", "float", "double", "decimal", "numeric":
			return []string{"number"}, nil, true
		case "integer", "int", "long":
			return []string{"integer"}, nil, true
		case "boolean", "bool":
			return []string{"boolean"}, nil, true
		case "array", "list", "tuple", "set":
			return []string{"array"}, nil, true
		case "object", "dict", "map", "json", "dictionary":
			return []string{"object"}, nil, true
		case "null", "nil":
			return []string{"null"}, nil, true
		}
		if strings.HasPrefix(s, "date") { // "Date (yyyy-mm-dd)"
			return []string{"string"}, nil, true
		}
	}
	return nil, nil, false
}

// splitTop splits s at sep, outside brackets.
func splitTop(s string, sep rune) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[', '<', '(':
			depth++
		case ']', '>', ')':
			depth--
		case sep:
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

var jsonTypeOrder = []string{"null", "boolean", "object", "array", "number", "integer", "string"}

func addTypes(types []string, add ...string) []string {
	for _, t := range add {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	sort.SliceStable(types, func(i, j int) bool {
		return slices.Index(jsonTypeOrder, types[i]) < slices.Index(jsonTypeOrder, types[j])
	})
	return types
}

// typesOf returns the JSON types s allows; nil means any.
func typesOf(s *jsonschema.Schema) []string {
	switch {
	case s == nil:
		return nil
	case s.Type != "":
		return []string{s.Type}
	default:
		return s.Types
	}
}

func setTypes(s *jsonschema.Schema, types []string) {
	s.Type, s.Types = "", nil
	switch len(types) {
	case 0:
	case 1:
		s.Type = types[0]
	default:
		s.Types = slices.Clone(types)
	}
}

func hasType(s *jsonschema.Schema, t string) bool { return slices.Contains(typesOf(s), t) }

// fits reports whether a value of type from is accepted where to is
// expected: integer fits number.
//
// It is stricter than the validator's schemas.Compatible (a number does not
// fit an integer here), because it decides whether a gold value always fits.
func fits(from string, to []string) bool {
	return slices.Contains(to, from) || (from == "integer" && slices.Contains(to, "number"))
}

// allFit reports whether every type of from fits to. Unknown types on either
// side cannot be checked and fit.
func allFit(from, to []string) bool {
	if len(from) == 0 || len(to) == 0 {
		return true
	}
	for _, f := range from {
		if !fits(f, to) {
			return false
		}
	}
	return true
}

func isFalseSchema(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// closed reports whether s is an object schema that declares its properties
// and allows no others.
func closed(s *jsonschema.Schema) bool {
	return s != nil && len(s.Properties) > 0 && isFalseSchema(s.AdditionalProperties)
}

func containsJSON(list []any, v any) bool {
	b, _ := json.Marshal(v)
	for _, e := range list {
		eb, _ := json.Marshal(e)
		if string(eb) == string(b) {
			return true
		}
	}
	return false
}

var badFieldChars = regexp.MustCompile(`[^A-Za-z0-9_]`)

// fieldName makes an output field name usable as a template path segment:
// characters other than letters, digits and _ become _, and a leading digit
// gets a leading _.
func fieldName(s string) string {
	f := badFieldChars.ReplaceAllString(s, "_")
	if f == "" || (f[0] >= '0' && f[0] <= '9') {
		f = "_" + f
	}
	return f
}

var badToolChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// toolName makes a spec function name a valid catalog name.
func toolName(s string) string {
	n := badToolChars.ReplaceAllString(s, "_")
	if n == "" {
		n = "_"
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}
