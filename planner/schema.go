package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Limits of strict structured outputs that the generated strict schema is
// kept within. They are the tighter of the documented limits of the
// providers that constrain decoding to a schema (OpenAI structured outputs,
// Anthropic strict tool use); a catalog whose strict schema would exceed
// them gets only the non-strict one.
const (
	// StrictMaxProperties caps the object properties of the whole schema.
	StrictMaxProperties = 5000
	// StrictMaxDepth caps how deeply objects nest.
	StrictMaxDepth = 10
	// StrictMaxEnumValues caps the enum values of the whole schema.
	StrictMaxEnumValues = 1000
	// StrictMaxStringLength caps the total length of property names and
	// enum values.
	StrictMaxStringLength = 120000
	// StrictMaxLargeEnumLength caps the total length of the values of one
	// enum that has more than 250 values.
	StrictMaxLargeEnumLength = 15000
)

// schemaCtx carries what a conversion needs: the document the references
// point into, and where in it the conversion is, for messages.
type schemaCtx struct {
	root     map[string]any
	problems []string
}

func (c *schemaCtx) problemf(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// toMap returns a JSON value of any Go type (a *jsonschema.Schema, a map)
// as plain decoded JSON.
func toMap(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Keywords that say nothing about the shape of a value and are dropped when
// a schema is embedded in the planning tool.
var droppedKeywords = []string{"$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "$vocabulary", "$dynamicAnchor"}

// normalize returns a self-contained copy of the schema s: local references
// inlined (a recursive one becomes an unconstrained schema and a problem),
// boolean schemas turned into objects, arrays given items, and keywords
// that mean nothing outside the tool's own document dropped. The result is
// the non-strict form every provider accepts.
func (c *schemaCtx) normalize(s any, path string, stack []string) any {
	switch s := s.(type) {
	case bool:
		if s {
			return map[string]any{}
		}
		return map[string]any{"not": map[string]any{}}
	case map[string]any:
		if ref, ok := s["$ref"].(string); ok {
			if slices.Contains(stack, ref) {
				c.problemf(path, "recursive reference %s", ref)
				out := map[string]any{"description": "a value shaped like its enclosing value (recursive schema " + ref + ")"}
				return out
			}
			target, ok := c.resolve(ref)
			if !ok {
				c.problemf(path, "unresolvable reference %s", ref)
				return map[string]any{}
			}
			inlined, _ := c.normalize(target, path, append(stack, ref)).(map[string]any)
			// Keywords beside $ref (2019-09 and later) apply too; a
			// description beside it describes this use.
			out := maps.Clone(inlined)
			siblings := maps.Clone(s)
			delete(siblings, "$ref")
			sib, _ := c.normalize(siblings, path, stack).(map[string]any)
			for k, v := range sib {
				if _, exists := out[k]; !exists || k == "description" {
					out[k] = v
				}
			}
			return out
		}
		out := map[string]any{}
		for k, v := range s {
			if slices.Contains(droppedKeywords, k) {
				continue
			}
			switch k {
			case "properties", "patternProperties", "$defs", "dependentSchemas":
				props, ok := v.(map[string]any)
				if !ok {
					out[k] = v
					continue
				}
				np := make(map[string]any, len(props))
				for name, ps := range props {
					np[name] = c.normalize(ps, path+"."+name, stack)
				}
				out[k] = np
			case "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems":
				if b, ok := v.(bool); ok && k != "items" {
					out[k] = b // additionalProperties: false stays a boolean
					continue
				}
				if arr, ok := v.([]any); ok { // draft-04 tuple items
					na := make([]any, len(arr))
					for i, e := range arr {
						na[i] = c.normalize(e, fmt.Sprintf("%s[%d]", path, i), stack)
					}
					out[k] = na
					continue
				}
				out[k] = c.normalize(v, path+"[]", stack)
			case "anyOf", "oneOf", "allOf", "prefixItems":
				arr, ok := v.([]any)
				if !ok {
					out[k] = v
					continue
				}
				na := make([]any, len(arr))
				for i, e := range arr {
					na[i] = c.normalize(e, path, stack)
				}
				out[k] = na
			default:
				out[k] = v
			}
		}
		if hasType(out, "array") {
			if _, ok := out["items"]; !ok {
				if _, ok := out["prefixItems"]; !ok {
					out["items"] = map[string]any{}
				}
			}
		}
		return out
	}
	return map[string]any{}
}

// resolve finds a local reference (#/$defs/x, #/definitions/x, #).
func (c *schemaCtx) resolve(ref string) (any, bool) {
	if ref == "#" {
		return c.root, true
	}
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = c.root
	for _, part := range strings.Split(rest, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Keywords a strict schema may carry.
var strictKeep = []string{"type", "description", "properties", "required", "additionalProperties", "items", "enum", "anyOf"}

// Keywords strict modes do not accept but whose meaning can be kept in the
// description, as the providers' own SDKs do.
var strictToDescription = []string{
	"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "default", "examples",
}

// Keywords that constrain a value in ways no strict schema can express.
var strictUnsupported = []string{
	"not", "if", "then", "else", "allOf", "patternProperties", "propertyNames", "dependentSchemas", "dependentRequired",
	"dependencies", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
	"prefixItems", "additionalItems", "$dynamicRef", "$ref",
}

// strict returns the strict form of a normalized schema: every object
// closed (additionalProperties false) with every property required,
// optional ones made nullable; oneOf read as anyOf; const as a one-value
// enum; constraints strict modes reject moved into the description.
// What cannot be expressed is reported as a problem.
func (c *schemaCtx) strict(s any, path string, root bool) any {
	m, ok := s.(map[string]any)
	if !ok {
		c.problemf(path, "not a schema object")
		return map[string]any{}
	}
	out := map[string]any{}
	for _, k := range strictUnsupported {
		if _, ok := m[k]; ok {
			c.problemf(path, "uses %s, which strict structured outputs do not support", k)
		}
	}
	var notes []string
	for _, k := range strictToDescription {
		if v, ok := m[k]; ok {
			b, _ := json.Marshal(v)
			notes = append(notes, k+" "+string(b))
		}
	}
	if d, ok := m["description"].(string); ok && d != "" {
		out["description"] = d
	}
	if len(notes) > 0 {
		d, _ := out["description"].(string)
		out["description"] = strings.TrimSpace(d + " (" + strings.Join(notes, ", ") + ")")
	}
	if v, ok := m["const"]; ok {
		m = maps.Clone(m)
		m["enum"] = []any{v}
	}
	if e, ok := m["enum"].([]any); ok {
		if m["type"] == nil {
			if t := enumType(e); t != "" {
				out["type"] = t
			}
		}
		for _, v := range e {
			switch v.(type) {
			case map[string]any, []any:
				c.problemf(path, "enum has a value that is not a string, number, boolean or null")
			}
		}
		out["enum"] = e
	}
	union, _ := m["anyOf"].([]any)
	if alt, ok := m["oneOf"].([]any); ok {
		union = append(slices.Clone(union), alt...)
	}
	if len(union) > 0 {
		alts := make([]any, 0, len(union))
		for i, a := range union {
			alts = append(alts, c.strict(a, fmt.Sprintf("%s.anyOf[%d]", path, i), false))
		}
		out["anyOf"] = alts
	}
	if t, ok := m["type"]; ok {
		out["type"] = t
	}
	_, hasProps := m["properties"]
	isObject := hasType(m, "object") || (hasProps && m["type"] == nil)
	if isObject {
		out["type"] = orType(m["type"], "object")
		props, _ := m["properties"].(map[string]any)
		ap, hasAP := m["additionalProperties"]
		switch {
		case hasAP && ap != false:
			c.problemf(path, "is an object with free-form keys (additionalProperties), which strict structured outputs do not support")
		case len(props) == 0 && !hasAP && !root:
			c.problemf(path, "is an object of any keys, which strict structured outputs do not support")
		}
		required := map[string]bool{}
		if r, ok := m["required"].([]any); ok {
			for _, n := range r {
				if s, ok := n.(string); ok {
					required[s] = true
				}
			}
		}
		np := map[string]any{}
		names := slices.Sorted(maps.Keys(props))
		for _, name := range names {
			ps := c.strict(props[name], path+"."+name, false)
			if !required[name] {
				ps = nullable(ps)
			}
			np[name] = ps
		}
		out["properties"] = np
		req := make([]any, len(names))
		for i, n := range names {
			req[i] = n
		}
		out["required"] = req
		out["additionalProperties"] = false
	}
	if hasType(m, "array") {
		items, ok := m["items"]
		if !ok {
			c.problemf(path, "is an array without items")
		} else {
			out["items"] = c.strict(items, path+"[]", false)
		}
	}
	if out["type"] == nil && out["anyOf"] == nil && out["enum"] == nil {
		c.problemf(path, "accepts any JSON value, which strict structured outputs cannot express")
	}
	return out
}

// enumType is the JSON type shared by every value of an enum, or "".
func enumType(values []any) string {
	t := ""
	for _, v := range values {
		var vt string
		switch v.(type) {
		case string:
			vt = "string"
		case bool:
			vt = "boolean"
		case float64:
			vt = "number"
		default:
			return ""
		}
		if t != "" && t != vt {
			return ""
		}
		t = vt
	}
	return t
}

// nullable returns s accepting null too.
func nullable(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	if acceptsNull(m) {
		return m
	}
	out := maps.Clone(m)
	switch t := m["type"].(type) {
	case string:
		out["type"] = []any{t, "null"}
		if e, ok := m["enum"].([]any); ok {
			out["enum"] = append(slices.Clone(e), nil)
		}
		return out
	case []any:
		out["type"] = append(slices.Clone(t), "null")
		if e, ok := m["enum"].([]any); ok {
			out["enum"] = append(slices.Clone(e), nil)
		}
		return out
	}
	if alts, ok := m["anyOf"].([]any); ok && m["enum"] == nil {
		out["anyOf"] = append(slices.Clone(alts), map[string]any{"type": "null"})
		return out
	}
	inner := maps.Clone(m)
	desc, _ := inner["description"].(string)
	delete(inner, "description")
	wrapped := map[string]any{"anyOf": []any{inner, map[string]any{"type": "null"}}}
	if desc != "" {
		wrapped["description"] = desc
	}
	return wrapped
}

func acceptsNull(m map[string]any) bool {
	if hasType(m, "null") {
		return true
	}
	if alts, ok := m["anyOf"].([]any); ok {
		for _, a := range alts {
			if am, ok := a.(map[string]any); ok && acceptsNull(am) {
				return true
			}
		}
	}
	return false
}

// widen lets a template string stand wherever an argument is not already
// free text: a value of another type becomes anyOf [its schema, string].
// Strings without an enum already accept templates. The arguments object
// itself is never widened (top is true for it).
func widen(s any, top bool) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	out := maps.Clone(m)
	if props, ok := m["properties"].(map[string]any); ok {
		np := make(map[string]any, len(props))
		for k, v := range props {
			np[k] = widen(v, false)
		}
		out["properties"] = np
	}
	if items, ok := m["items"].(map[string]any); ok {
		out["items"] = widen(items, false)
	}
	if alts, ok := m["anyOf"].([]any); ok {
		na := make([]any, len(alts))
		for i, a := range alts {
			na[i] = widen(a, false)
		}
		out["anyOf"] = na
	}
	if top || acceptsTemplate(out) {
		return out
	}
	desc, _ := out["description"].(string)
	delete(out, "description")
	// The prompt teaches templates: the alternative says no more than
	// that a string goes here, at a few tokens per argument.
	wrapped := map[string]any{"anyOf": []any{out, map[string]any{"type": "string"}}}
	if desc != "" {
		wrapped["description"] = desc
	}
	return wrapped
}

// acceptsTemplate reports whether m needs no template alternative: it
// accepts strings already (an enum or a format stays as it is, since a
// template seldom stands for one), or it accepts anything at all.
func acceptsTemplate(m map[string]any) bool {
	if len(m) == 0 || hasType(m, "string") {
		return true
	}
	if m["type"] == nil && m["anyOf"] == nil && m["oneOf"] == nil && m["allOf"] == nil && m["not"] == nil && m["enum"] == nil && m["const"] == nil {
		return m["properties"] == nil && m["items"] == nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok {
			for _, a := range alts {
				if am, ok := a.(map[string]any); ok && acceptsTemplate(am) {
					return true
				}
			}
		}
	}
	return false
}

// hasType reports whether the schema's type is or includes t.
func hasType(m map[string]any, t string) bool {
	switch v := m["type"].(type) {
	case string:
		return v == t
	case []any:
		for _, x := range v {
			if x == t {
				return true
			}
		}
	}
	return false
}

func orType(t any, def string) any {
	if t == nil {
		return def
	}
	return t
}

// stripNulls removes the null values a strict schema made the model write
// for optional properties, so the arguments validate against the tool's own
// schema. schema is the tool's normalized input schema.
func stripNulls(v any, schema map[string]any) any {
	obj, ok := v.(map[string]any)
	if !ok || schema == nil {
		return v
	}
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if r, ok := schema["required"].([]any); ok {
		for _, n := range r {
			if s, ok := n.(string); ok {
				required[s] = true
			}
		}
	}
	for k, val := range obj {
		ps, _ := props[k].(map[string]any)
		if val == nil && !required[k] && (ps == nil || !acceptsNull(ps)) {
			delete(obj, k)
			continue
		}
		if ps != nil {
			obj[k] = stripNulls(val, ps)
		}
	}
	return obj
}

// Lean returns the compact rendering of a tool's input schema that the
// planner's non-strict planning tool carries: see lean. The model section
// of the bench harness offers ReAct the same rendering, for comparison.
func Lean(schema map[string]any) map[string]any { return lean(schema, true) }

// lean drops from a normalized argument schema what a plan does not need:
// titles (most repeat the property's name), defaults, keyword or closing
// sentence of a description (a plan leaves an argument out to get its
// default), descriptions that only repeat the
// property's name ("currencyCode": "Currency code."), and, when loose,
// additionalProperties: true, which is the default. It returns a copy.
func lean(s map[string]any, loose bool) map[string]any {
	return leanSchema(s, "", loose).(map[string]any)
}

func leanSchema(v any, name string, loose bool) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		switch k {
		case "title", "default":
			continue
		case "additionalProperties":
			if b, ok := e.(bool); ok && b && loose {
				continue
			}
			out[k] = leanSchema(e, "", loose)
		case "description":
			d, ok := e.(string)
			if !ok {
				out[k] = e
				continue
			}
			if d = withoutDefault(d); d == "" || (name != "" && sameWords(d, name)) {
				continue
			}
			out[k] = d
		case "properties":
			props, ok := e.(map[string]any)
			if !ok {
				out[k] = e
				continue
			}
			np := make(map[string]any, len(props))
			for pn, ps := range props {
				np[pn] = leanSchema(ps, pn, loose)
			}
			out[k] = np
		case "items", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems":
			out[k] = leanSchema(e, name, loose)
		case "anyOf", "oneOf", "allOf", "prefixItems":
			arr, ok := e.([]any)
			if !ok {
				out[k] = e
				continue
			}
			na := make([]any, len(arr))
			for i, x := range arr {
				na[i] = leanSchema(x, name, loose)
			}
			out[k] = na
		default:
			out[k] = e
		}
	}
	return out
}

// sameWords reports whether a description says no more than a name: the
// same words, in order, ignoring case, punctuation and how the name joins
// them ("Currency code." and currencyCode, "The user id" and user_id).
func sameWords(desc, name string) bool {
	words := func(s string, split bool) []string {
		var ws []string
		var cur []rune
		flush := func() {
			if len(cur) > 0 {
				ws = append(ws, strings.ToLower(string(cur)))
				cur = cur[:0]
			}
		}
		var prev rune
		for _, r := range s {
			switch {
			case r >= 'A' && r <= 'Z' && split && prev >= 'a' && prev <= 'z':
				flush()
				cur = append(cur, r)
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
				cur = append(cur, r)
			default:
				flush()
			}
			prev = r
		}
		flush()
		return ws
	}
	d := words(desc, false)
	if len(d) > 0 && (d[0] == "the" || d[0] == "a" || d[0] == "an") {
		d = d[1:]
	}
	return len(d) > 0 && slices.Equal(d, words(name, true))
}

// defaultSentence matches a description's closing sentence that only
// states the default: "Default value: 1", "Defaults to en-US.", "(default: 10)".
var defaultSentence = regexp.MustCompile(`(?i)(^|[.;,]\s+|\s*\()(by )?default(s| value| is)?( to)?:?\s[^.;()]*[.)]?\s*$`)

// withoutDefault returns the description without a closing sentence that
// only states the default.
func withoutDefault(d string) string {
	loc := defaultSentence.FindStringSubmatchIndex(d)
	if loc == nil {
		return d
	}
	// keep the punctuation that ended the sentence before it
	cut := loc[0]
	if loc[2] >= 0 && loc[3] > loc[2] && strings.ContainsAny(d[loc[2]:loc[3]], ".;") {
		cut = loc[2] + 1
	}
	return strings.TrimSpace(d[:cut])
}
