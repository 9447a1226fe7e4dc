package planner_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// The providers' documented limits on tool schemas, written down as checks.
//
// OpenAI function calling with "strict": true (structured outputs):
//   - the root is an object schema, not anyOf;
//   - every object has "additionalProperties": false and lists every one
//     of its properties in "required" (optional means nullable);
//   - supported: type (string, number, integer, boolean, object, array,
//     null, or a list of them), properties, required, additionalProperties,
//     items, enum, const, anyOf, description, $ref/$defs; not allOf, oneOf,
//     not, if/then/else, patternProperties, propertyNames,
//     unevaluatedProperties, dependentRequired/Schemas, contains,
//     prefixItems, and (for older models) no minLength, maxLength, pattern,
//     format, minimum, maximum, multipleOf, minItems, maxItems,
//     uniqueItems, minProperties, maxProperties;
//   - at most 5000 object properties, 10 levels of nesting, 1000 enum
//     values, 120,000 characters of property names, definition names, enum
//     and const values, and 15,000 characters for an enum of over 250 values.
//
// Anthropic tool use with "strict": true:
//   - input_schema is an object schema; every object has
//     "additionalProperties": false;
//   - supported: the basic types, enum (of strings, numbers, booleans or
//     null), const, anyOf, allOf, local $ref/$defs, required, a few string
//     formats, minItems of 0 or 1;
//   - not supported: recursive schemas, external $ref, numerical
//     constraints (minimum, maximum, multipleOf), string constraints
//     (minLength, maxLength, complex patterns), array constraints beyond
//     minItems 0 or 1.
//
// Both, without strict: parameters / input_schema is an object schema
// ("type": "object" at the root, no combinator there), and OpenAI rejects
// an array schema without items. The planning tool's schemas must also be
// self-contained: a tool's $ref would point into the planning tool's root.

var strictKeywords = []string{"type", "description", "properties", "required", "additionalProperties", "items", "enum", "anyOf"}

var jsonTypes = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

// visit calls f for every subschema of s with its path and nesting depth
// (objects with properties count one level).
func visit(s any, path string, depth int, f func(m map[string]any, path string, depth int)) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	f(m, path, depth)
	if props, ok := m["properties"].(map[string]any); ok {
		for k, v := range props {
			visit(v, path+".properties."+k, depth+1, f)
		}
	}
	if items, ok := m["items"]; ok {
		visit(items, path+".items", depth, f)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := m[k].([]any); ok {
			for i, a := range alts {
				visit(a, fmt.Sprintf("%s.%s[%d]", path, k, i), depth, f)
			}
		}
	}
	for _, k := range []string{"additionalProperties", "not"} {
		if sub, ok := m[k].(map[string]any); ok {
			visit(sub, path+"."+k, depth, f)
		}
	}
}

func types(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

func checkRoot(s map[string]any) []string {
	var v []string
	if s["type"] != "object" {
		v = append(v, fmt.Sprintf("root: type is %v, want \"object\"", s["type"]))
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "enum"} {
		if _, ok := s[k]; ok {
			v = append(v, "root: "+k+" is not allowed at the root")
		}
	}
	return v
}

func checkOpenAIStrict(s map[string]any) []string {
	v := checkRoot(s)
	props, enums, chars, maxDepth := 0, 0, 0, 0
	visit(s, "#", 0, func(m map[string]any, path string, depth int) {
		maxDepth = max(maxDepth, depth)
		for k := range m {
			if !slices.Contains(strictKeywords, k) {
				v = append(v, path+": keyword "+k+" is not supported in strict mode")
			}
		}
		for _, t := range types(m) {
			if !slices.Contains(jsonTypes, t) {
				v = append(v, path+": unknown type "+t)
			}
		}
		if m["type"] == nil && m["anyOf"] == nil && m["enum"] == nil {
			v = append(v, path+": a schema needs a type, an anyOf or an enum")
		}
		if p, ok := m["properties"].(map[string]any); ok || slices.Contains(types(m), "object") {
			if m["additionalProperties"] != false {
				v = append(v, path+": an object needs additionalProperties: false")
			}
			req, _ := m["required"].([]any)
			for name := range p {
				chars += len(name)
				if !slices.Contains(req, any(name)) {
					v = append(v, path+": property "+name+" is not required")
				}
			}
			props += len(p)
		}
		if slices.Contains(types(m), "array") && m["items"] == nil {
			v = append(v, path+": an array needs items")
		}
		if e, ok := m["enum"].([]any); ok {
			enums += len(e)
			n := 0
			for _, x := range e {
				if s, ok := x.(string); ok {
					n += len(s)
				}
			}
			chars += n
			if len(e) > 250 && n > 15000 {
				v = append(v, path+": an enum of more than 250 values is longer than 15,000 characters")
			}
		}
	})
	if props > 5000 {
		v = append(v, fmt.Sprintf("%d object properties; the limit is 5000", props))
	}
	if maxDepth > 10 {
		v = append(v, fmt.Sprintf("%d levels of nesting; the limit is 10", maxDepth))
	}
	if enums > 1000 {
		v = append(v, fmt.Sprintf("%d enum values; the limit is 1000", enums))
	}
	if chars > 120000 {
		v = append(v, fmt.Sprintf("%d characters of names and enum values; the limit is 120,000", chars))
	}
	return v
}

var anthropicUnsupported = []string{
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
	"maxItems", "uniqueItems", "contains", "prefixItems", "not", "if", "then", "else", "patternProperties", "propertyNames",
	"unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas", "minProperties", "maxProperties",
}

func checkAnthropicStrict(s map[string]any) []string {
	v := checkRoot(s)
	visit(s, "#", 0, func(m map[string]any, path string, depth int) {
		for _, k := range anthropicUnsupported {
			if _, ok := m[k]; ok {
				v = append(v, path+": "+k+" is not supported by strict tool use")
			}
		}
		if n, ok := m["minItems"].(float64); ok && n > 1 {
			v = append(v, path+": minItems above 1 is not supported")
		}
		if ref, ok := m["$ref"].(string); ok {
			v = append(v, path+": $ref "+ref+" (the planning schema must be self-contained and never recursive)")
		}
		if _, ok := m["properties"]; ok || slices.Contains(types(m), "object") {
			if m["additionalProperties"] != false {
				v = append(v, path+": an object needs additionalProperties: false")
			}
		}
		if e, ok := m["enum"].([]any); ok {
			for _, x := range e {
				switch x.(type) {
				case map[string]any, []any:
					v = append(v, path+": enum values must be strings, numbers, booleans or null")
				}
			}
		}
	})
	return v
}

func checkNonStrict(s map[string]any) []string {
	v := checkRoot(s)
	var walk func(x any, path string)
	walk = func(x any, path string) {
		switch x := x.(type) {
		case bool:
			v = append(v, path+": a boolean schema")
		case map[string]any:
			if _, ok := x["$ref"]; ok {
				v = append(v, path+": $ref (the planning schema must be self-contained)")
			}
			if _, ok := x["$defs"]; ok {
				v = append(v, path+": $defs")
			}
			if slices.Contains(types(x), "array") && x["items"] == nil && x["prefixItems"] == nil {
				v = append(v, path+": an array needs items")
			}
			if req, ok := x["required"].([]any); ok {
				props, _ := x["properties"].(map[string]any)
				for _, r := range req {
					if _, ok := props[r.(string)]; !ok {
						v = append(v, fmt.Sprintf("%s: required %v is not a property", path, r))
					}
				}
			}
			for k, sub := range x {
				switch k {
				case "properties", "$defs", "patternProperties":
					if m, ok := sub.(map[string]any); ok {
						for name, ps := range m {
							walk(ps, path+"."+k+"."+name)
						}
					}
				case "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames":
					if _, ok := sub.(bool); ok && k == "additionalProperties" {
						continue
					}
					walk(sub, path+"."+k)
				case "anyOf", "oneOf", "allOf", "prefixItems":
					if arr, ok := sub.([]any); ok {
						for i, a := range arr {
							walk(a, fmt.Sprintf("%s.%s[%d]", path, k, i))
						}
					}
				}
			}
		}
	}
	walk(s, "#")
	return v
}

// hardTools have schemas as downstream servers write them: $defs and $ref
// (pydantic), oneOf, allOf, recursion, tuples, free-form maps, formats.
func hardTools(t *testing.T) []registry.Tool {
	return []registry.Tool{
		{Name: "pydantic", Description: "refs", InputSchema: schema(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
			"$defs":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
			"properties":{"a":{"$ref":"#/$defs/Point"},"b":{"$ref":"#/$defs/Point","description":"second"},
			  "when":{"type":"string","format":"date-time"},"kind":{"const":"fixed"},"n":{"type":"integer","minimum":0,"maximum":9}},"required":["a"]}`)},
		{Name: "unions", Description: "oneOf", InputSchema: schema(t, `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]},"list":{"type":"array","items":{"type":"string"}}}}`)},
		{Name: "anyarray", Description: "an array of anything", InputSchema: schema(t, `{"type":"object","properties":{"list":{"type":"array"}}}`)},
		{Name: "recursive", Description: "a tree", InputSchema: schema(t, `{"type":"object","$defs":{"Node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}},
			"properties":{"root":{"$ref":"#/$defs/Node"}}}`)},
		{Name: "combined", Description: "allOf and a map", InputSchema: schema(t, `{"type":"object","properties":{"x":{"allOf":[{"type":"string"},{"minLength":2}]},"m":{"type":"object","additionalProperties":{"type":"string"}},"t":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}}}`)},
		{Name: "noargs", Description: "no arguments", InputSchema: schema(t, `{"type":"object"}`)},
	}
}

func TestSchemasWithinProviderLimits(t *testing.T) {
	catalogs := map[string][]registry.Tool{
		"blog":    append(blogTools(t, &calls{}), orchestrateTool(t)),
		"builtin": goldenCatalogs(t)["builtin"],
		"hard":    hardTools(t),
		"empty":   nil,
	}
	for name, tools := range catalogs {
		t.Run(name, func(t *testing.T) {
			tool := planner.Build(1, tools, planner.BuildOptions{})
			for _, p := range checkNonStrict(tool.Loose) {
				t.Errorf("loose: %s", p)
			}
			if tool.Strict == nil {
				if len(tool.StrictProblems) == 0 {
					t.Error("no strict schema and no problem said why")
				}
				return
			}
			for _, p := range checkOpenAIStrict(tool.Strict) {
				t.Errorf("strict (OpenAI): %s", p)
			}
			for _, p := range checkAnthropicStrict(tool.Strict) {
				t.Errorf("strict (Anthropic): %s", p)
			}
			for _, p := range checkNonStrict(tool.Strict) {
				t.Errorf("strict (any provider): %s", p)
			}
		})
	}
}

// Each hard schema alone: the strictable ones get a strict schema, the
// others say why not.
func TestStrictness(t *testing.T) {
	want := map[string]string{
		"pydantic":  "",
		"unions":    "",
		"noargs":    "",
		"recursive": "recursive reference #/$defs/Node",
		"combined":  "uses allOf",
		"anyarray":  "arguments.list[]: accepts any JSON value",
	}
	for _, tool := range hardTools(t) {
		t.Run(tool.Name, func(t *testing.T) {
			pt := planner.Build(1, []registry.Tool{tool}, planner.BuildOptions{})
			problems := strings.Join(pt.StrictProblems, "\n")
			if want[tool.Name] == "" {
				if pt.Strict == nil {
					t.Fatalf("not strict: %s", problems)
				}
				for _, p := range append(checkOpenAIStrict(pt.Strict), checkAnthropicStrict(pt.Strict)...) {
					t.Error(p)
				}
				return
			}
			if pt.Strict != nil || !strings.Contains(problems, want[tool.Name]) {
				t.Errorf("strict = %v, problems %q; want none and a problem with %q", pt.Strict != nil, problems, want[tool.Name])
			}
		})
	}
}

// A catalog too large for strict modes falls back to the non-strict schema.
func TestStrictSizeLimit(t *testing.T) {
	var tools []registry.Tool
	for i := range 260 {
		var props []string
		for j := range 20 {
			props = append(props, fmt.Sprintf(`"field_%d":{"type":"string"}`, j))
		}
		tools = append(tools, registry.Tool{Name: fmt.Sprintf("tool_%03d", i), Description: "d",
			InputSchema: schema(t, `{"type":"object","properties":{`+strings.Join(props, ",")+`}}`)})
	}
	pt := planner.Build(1, tools, planner.BuildOptions{})
	if pt.Strict != nil {
		t.Fatalf("a schema of %d tools with 20 properties each is strict", len(tools))
	}
	if !strings.Contains(strings.Join(pt.StrictProblems, "\n"), "properties; strict modes allow 5000") {
		t.Errorf("problems = %v", pt.StrictProblems)
	}
	if def := pt.Def(); def.Strict {
		t.Error("Def() is strict without a strict schema")
	}
	for _, p := range checkNonStrict(pt.Loose) {
		t.Error(p)
	}
}
