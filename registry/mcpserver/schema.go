package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/internal/schemaload"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// NormalizeSchema turns a schema as a downstream server sent it (a decoded
// JSON value, usually map[string]any; json.RawMessage, []byte and
// *jsonschema.Schema are accepted too) into a *jsonschema.Schema that
// resolves, so that arguments can be validated and templates type-checked
// against it.
//
// It accepts draft-04, draft-07, 2019-09 and 2020-12 schemas and repairs what
// real servers get wrong:
//   - type names from other languages ("dict", "list", "str", "int", "float",
//     "bool", "None", upper case) become JSON Schema types; unknown type
//     names are dropped rather than rejected;
//   - "required": true on a property moves into its parent's required list;
//   - a root with no type but with properties (or nothing) becomes an object;
//   - "nullable": true (OpenAPI) adds "null" to the types;
//   - draft-04 boolean exclusiveMinimum/exclusiveMaximum become numbers;
//   - a bare type name where a schema belongs ("properties": {"a": "string"})
//     becomes {"type": "string"};
//   - patterns Go cannot compile (lookarounds, backreferences) and $refs to
//     other documents are dropped, which makes the schema looser, never
//     stricter;
//   - $schema is kept only when it names draft-07 or 2020-12; older drafts
//     are read as draft-07 and unknown ones as 2020-12.
//
// A nil raw value yields a nil schema and no error. A schema that still does
// not resolve, or that the schema loader (internal/schemaload) refuses, is
// an error saying why.
func NormalizeSchema(raw any) (*jsonschema.Schema, error) {
	if raw == nil {
		return nil, nil
	}
	// A round trip through JSON copies the caller's maps, so repairs never
	// touch them, and gives every number the same Go type.
	data, err := schemaload.Encode(raw)
	if err != nil {
		return nil, fmt.Errorf("encoding schema: %w", err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decoding schema: %w", err)
	}
	if v == nil {
		return nil, nil
	}

	var root map[string]any
	switch r := v.(type) {
	case map[string]any:
		root = r
	case bool:
		if !r {
			return nil, errors.New("the schema is false: it accepts nothing")
		}
		root = map[string]any{}
	case string:
		root = map[string]any{"type": r}
	default:
		return nil, fmt.Errorf("the schema is a JSON %s, not an object", schemas.TypeName(v))
	}

	fixDraft(root)
	fixSchema(root)
	if _, ok := root["type"]; !ok && !hasAny(root, "$ref", "allOf", "anyOf", "oneOf", "not", "if", "enum", "const", "items", "prefixItems") {
		root["type"] = "object"
	}

	// The repaired schema enters through the loader, as every schema from
	// outside does: bounded, its references resolved, refused when a walk
	// of it could not end.
	return schemaload.Load("", root, schemaload.DefaultLimits())
}

// isObjectSchema reports whether s describes JSON objects only (possibly
// also null), as MCP requires of an inputSchema.
func isObjectSchema(s *jsonschema.Schema) bool {
	if s.Type != "" {
		return s.Type == "object"
	}
	if len(s.Types) == 0 {
		return false
	}
	for _, t := range s.Types {
		if t != "object" && t != "null" {
			return false
		}
	}
	return slices.Contains(s.Types, "object")
}

const (
	draft07  = "http://json-schema.org/draft-07/schema#"
	draft202 = "https://json-schema.org/draft/2020-12/schema"
)

// fixDraft keeps $schema only where the validator understands it.
func fixDraft(root map[string]any) {
	sv, ok := root["$schema"].(string)
	if !ok {
		delete(root, "$schema")
		return
	}
	switch trimmed := strings.TrimSuffix(strings.TrimSpace(sv), "#"); {
	case strings.HasSuffix(trimmed, "json-schema.org/draft-07/schema"),
		strings.HasSuffix(trimmed, "json-schema.org/draft-06/schema"),
		strings.HasSuffix(trimmed, "json-schema.org/draft-04/schema"),
		strings.HasSuffix(trimmed, "json-schema.org/draft/2019-09/schema"):
		// 2019-09 and the older drafts read "items": [...] as draft-07 does.
		root["$schema"] = draft07
	case strings.HasSuffix(trimmed, "json-schema.org/draft/2020-12/schema"):
		root["$schema"] = draft202
	default:
		delete(root, "$schema")
	}
}

var typeAliases = map[string]string{
	"object": "object", "dict": "object", "map": "object", "hash": "object", "record": "object", "struct": "object",
	"array": "array", "list": "array", "tuple": "array", "set": "array", "sequence": "array",
	"string": "string", "str": "string", "text": "string",
	"integer": "integer", "int": "integer", "long": "integer", "int32": "integer", "int64": "integer",
	"number": "number", "float": "number", "double": "number", "decimal": "number", "float64": "number", "numeric": "number",
	"boolean": "boolean", "bool": "boolean",
	"null": "null", "none": "null", "nil": "null",
}

// schemaMapKeys hold maps from names to schemas.
var schemaMapKeys = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}

// schemaKeys hold one schema.
var schemaKeys = []string{"additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
	"propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}

// schemaListKeys hold lists of schemas.
var schemaListKeys = []string{"allOf", "anyOf", "oneOf", "prefixItems"}

var integerKeys = []string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"}

var numberKeys = []string{"minimum", "maximum", "multipleOf"}

// fixSchema repairs the schema s in place, and its subschemas.
func fixSchema(s map[string]any) {
	// Annotations that do not describe values; Extra keeps unknown keys,
	// but these are known ones of the wrong shape in some servers.
	if v, ok := s["type"]; ok {
		if types := normalizeTypes(v); len(types) == 0 {
			delete(s, "type")
		} else if len(types) == 1 {
			s["type"] = types[0]
		} else {
			s["type"] = types
		}
	}
	if n, ok := s["nullable"].(bool); ok {
		delete(s, "nullable")
		if n {
			switch t := s["type"].(type) {
			case string:
				if t != "null" {
					s["type"] = []any{t, "null"}
				}
			case []any:
				if !slices.Contains(t, any("null")) {
					s["type"] = append(t, "null")
				}
			}
		}
	}

	// draft-03 style "required": true/false on a property is handled by
	// the parent; here, anything that is not a list of strings goes.
	if req, ok := s["required"]; ok {
		list, ok := req.([]any)
		if !ok {
			delete(s, "required")
		} else {
			var names []any
			for _, r := range list {
				if name, ok := r.(string); ok && !slices.Contains(names, any(name)) {
					names = append(names, name)
				}
			}
			if len(names) == 0 {
				delete(s, "required")
			} else {
				s["required"] = names
			}
		}
	}

	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		if b, ok := s[k].(bool); ok {
			delete(s, k)
			bound := "minimum"
			if k == "exclusiveMaximum" {
				bound = "maximum"
			}
			if n, ok := s[bound].(float64); ok && b {
				s[k] = n
				delete(s, bound)
			}
		} else if _, ok := s[k].(float64); !ok {
			delete(s, k)
		}
	}
	for _, k := range numberKeys {
		if v, ok := s[k]; ok {
			if n, ok := v.(float64); !ok || (k == "multipleOf" && n <= 0) {
				delete(s, k)
			}
		}
	}
	for _, k := range integerKeys {
		if v, ok := s[k]; ok {
			n, ok := v.(float64)
			if !ok || n < 0 || n != math.Trunc(n) || n > math.MaxInt32 {
				delete(s, k)
			}
		}
	}
	if p, ok := s["pattern"]; ok {
		if ps, ok := p.(string); !ok || !compiles(ps) {
			delete(s, "pattern")
		}
	}
	if e, ok := s["enum"]; ok {
		if _, ok := e.([]any); !ok {
			delete(s, "enum")
		}
	}
	for _, k := range []string{"$id", "$anchor", "$dynamicAnchor", "$comment", "title", "description", "format", "$dynamicRef"} {
		if v, ok := s[k]; ok {
			if _, ok := v.(string); !ok {
				delete(s, k)
			}
		}
	}
	if _, ok := s["$vocabulary"]; ok {
		delete(s, "$vocabulary")
	}
	// $id changes how $refs resolve; a relative or odd $id in a nested
	// schema breaks resolution for no benefit here.
	delete(s, "$id")
	delete(s, "id") // draft-04
	if ref, ok := s["$ref"]; ok {
		if r, ok := ref.(string); !ok || !strings.HasPrefix(r, "#") {
			delete(s, "$ref")
		}
	}

	for _, k := range schemaMapKeys {
		v, ok := s[k]
		if !ok {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			delete(s, k)
			continue
		}
		var required []any
		for name, sub := range m {
			if k == "patternProperties" && !compiles(name) {
				delete(m, name)
				continue
			}
			fixed, req := fixSubschema(sub)
			m[name] = fixed
			if req && k == "properties" {
				required = append(required, name)
			}
		}
		if len(required) > 0 {
			slices.SortFunc(required, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			have, _ := s["required"].([]any)
			for _, r := range required {
				if !slices.Contains(have, r) {
					have = append(have, r)
				}
			}
			s["required"] = have
		}
	}
	for _, k := range schemaKeys {
		if v, ok := s[k]; ok {
			s[k], _ = fixSubschema(v)
		}
	}
	if v, ok := s["items"]; ok {
		if list, ok := v.([]any); ok {
			for i := range list {
				list[i], _ = fixSubschema(list[i])
			}
		} else {
			s["items"], _ = fixSubschema(v)
		}
	}
	for _, k := range schemaListKeys {
		v, ok := s[k]
		if !ok {
			continue
		}
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			delete(s, k)
			continue
		}
		for i := range list {
			list[i], _ = fixSubschema(list[i])
		}
	}
	if v, ok := s["dependencies"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			delete(s, "dependencies")
		} else {
			for name, d := range m {
				if _, ok := d.([]any); ok {
					continue
				}
				m[name], _ = fixSubschema(d)
			}
		}
	}
}

// fixSubschema repairs a value found where a schema belongs. It reports
// whether the value carried a draft-03 "required": true.
func fixSubschema(v any) (any, bool) {
	switch s := v.(type) {
	case bool:
		return s, false
	case map[string]any:
		req := false
		if b, ok := s["required"].(bool); ok {
			req = b
			delete(s, "required")
		}
		fixSchema(s)
		return s, req
	case string:
		m := map[string]any{"type": s}
		fixSchema(m)
		return m, false
	default:
		return map[string]any{}, false
	}
}

// normalizeTypes maps a "type" value to JSON Schema type names, dropping
// the ones it does not know.
func normalizeTypes(v any) []any {
	var in []any
	switch t := v.(type) {
	case string:
		in = []any{t}
	case []any:
		in = t
	}
	var out []any
	for _, x := range in {
		name, ok := x.(string)
		if !ok {
			continue
		}
		if t, ok := typeAliases[strings.ToLower(strings.TrimSpace(name))]; ok && !slices.Contains(out, any(t)) {
			out = append(out, t)
		}
	}
	// "integer" with "number" is just "number".
	if slices.Contains(out, any("number")) {
		out = slices.DeleteFunc(out, func(x any) bool { return x == "integer" })
	}
	return out
}

func compiles(pattern string) bool {
	_, err := regexp.Compile(pattern)
	return err == nil
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
