package schemas

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
)

func schema(t *testing.T, s string) *jsonschema.Schema {
	t.Helper()
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return &sc
}

// path parses "a.b[0].c" into segments.
func path(p string) []Seg {
	var out []Seg
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			continue
		}
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, Seg{Key: name})
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			n := 0
			for _, c := range idx {
				n = n*10 + int(c-'0')
			}
			out = append(out, Seg{Index: n, IsIndex: true})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

const output = `{"type":"object","properties":{
	"title":{"type":"string"},
	"count":{"type":"integer"},
	"sources":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"}}}},
	"meta":{"$ref":"#/$defs/meta"},
	"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},
	"rest":{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"boolean"}},
	"old":{"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"number"}},
	"note":{"type":["null","string"]},
	"labels":{"type":"object","additionalProperties":{"type":"object","properties":{"color":{"type":"string"}}}},
	"pat":{"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false},
	"open":{},
	"anyobj":{"type":"object"},
	"user":{"$ref":"#/definitions/user"},
	"both":{"allOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"b":{"type":"integer"}}}]},
	"either":{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"a":{"type":"integer"},"c":{"type":"boolean"}}}]},
	"shape":{"oneOf":[{"properties":{"r":{"type":"number"}}},{"properties":{"s":{"type":"number"}}}]},
	"kind":{"enum":["a","b"]},
	"one":{"const":3},
	"numstr":{"anyOf":[{"type":"string"},{"type":"number"}]},
	"narrowed":{"type":["integer","string"],"allOf":[{"type":"string"}]}
},"$defs":{"meta":{"type":"object","properties":{"author":{"type":"string"}},"additionalProperties":false}},
"definitions":{"user":{"type":"object","properties":{"name":{"type":"string"},"friends":{"type":"array","items":{"$ref":"#/definitions/user"}}}}}}`

func TestWalkAndTypes(t *testing.T) {
	root := schema(t, output)
	for _, tc := range []struct {
		path  string
		types []string // nil: any type
		open  bool
		err   string // a part of the WalkError's reason
		at    int
		avail []string
	}{
		{path: "", types: []string{"object"}},
		{path: "title", types: []string{"string"}},
		{path: "sources[0].url", types: []string{"string"}},
		{path: "sources[7]", types: []string{"object"}},
		{path: "meta.author", types: []string{"string"}},
		{path: "pair[0]", types: []string{"string"}},
		{path: "pair[1]", types: []string{"integer"}},
		{path: "pair[2]", err: "cannot index with [2]: the value is an array of 2 items", at: 1},
		{path: "rest[0]", types: []string{"string"}},
		{path: "rest[5]", types: []string{"boolean"}},
		{path: "old[0]", types: []string{"string"}},
		{path: "old[3]", types: []string{"number"}},
		{path: "note", types: []string{"null", "string"}},
		{path: "labels.anything.color", types: []string{"string"}},
		{path: "pat.x-1", types: []string{"integer"}},
		{path: "pat.y", err: `field "y" does not exist`, at: 1},
		{path: "open.a[1].b", open: true},
		{path: "anyobj.x", open: true},
		{path: "user.friends[0].friends[2].name", types: []string{"string"}},
		{path: "both.a", types: []string{"string"}},
		{path: "both.b", types: []string{"integer"}},
		{path: "either.a", types: []string{"integer", "string"}},
		{path: "either.c", types: []string{"boolean"}},
		{path: "shape.r", types: []string{"number"}},
		{path: "shape.s", types: []string{"number"}},
		{path: "kind", types: []string{"string"}},
		{path: "one", types: []string{"integer"}},
		{path: "numstr", types: []string{"number", "string"}},
		{path: "narrowed", types: []string{"string"}},
		{path: "titel", err: `field "titel" does not exist`, avail: []string{"anyobj", "both", "count", "either", "kind", "labels", "meta", "narrowed", "note", "numstr", "old", "one", "open", "pair", "pat", "rest", "shape", "sources", "title", "user"}},
		{path: "meta.email", err: `field "email" does not exist`, at: 1, avail: []string{"author"}},
		{path: "title.x", err: "of type string, not an object", at: 1},
		{path: "sources.url", err: "of type array, not an object", at: 1},
		{path: "meta[0]", err: "cannot index with [0]: the value is of type object", at: 1},
		{path: "shape.t", err: `field "t" does not exist`, at: 1, avail: []string{"r", "s"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			n, err := Walk(root, path(tc.path))
			if tc.err != "" {
				var we *WalkError
				if !errors.As(err, &we) {
					t.Fatalf("Walk = %v, want a *WalkError", err)
				}
				if !strings.Contains(we.Reason, tc.err) || we.At != tc.at || !cmp.Equal(we.Available, tc.avail) {
					t.Errorf("error %+v, want at %d a reason with %q and available %v", we, tc.at, tc.err, tc.avail)
				}
				return
			}
			if err != nil {
				t.Fatalf("Walk: %v", err)
			}
			if n.Open != tc.open {
				t.Errorf("open = %v, want %v", n.Open, tc.open)
			}
			if diff := cmp.Diff(tc.types, n.Types()); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		from, to []string
		want     bool
	}{
		{nil, []string{"string"}, true},
		{[]string{"string"}, nil, true},
		{[]string{"string"}, []string{"string"}, true},
		{[]string{"integer"}, []string{"number"}, true},
		{[]string{"number"}, []string{"integer"}, true},
		{[]string{"null", "string"}, []string{"string"}, true},
		{[]string{"array"}, []string{"string"}, false},
		{[]string{"string"}, []string{"integer"}, false},
		{[]string{"boolean"}, []string{"null", "string"}, false},
		{[]string{}, []string{"string"}, false},
	} {
		if got := Compatible(tc.from, tc.to); got != tc.want {
			t.Errorf("Compatible(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestRequiredAndProperties(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schema   string
		required []string
		props    []string
		closed   bool
	}{
		{"plain", `{"type":"object","properties":{"a":{},"b":{}},"required":["b"]}`, []string{"b"}, []string{"a", "b"}, false},
		{"closed", `{"type":"object","properties":{"a":{}},"additionalProperties":false}`, nil, []string{"a"}, true},
		{"additional schema", `{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}}`, nil, []string{"a"}, false},
		{"pattern keeps it open", `{"type":"object","properties":{"a":{}},"patternProperties":{"^x":{}},"additionalProperties":false}`, nil, []string{"a"}, false},
		{"ref", `{"$ref":"#/$defs/o","$defs":{"o":{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false}}}`, []string{"a"}, []string{"a"}, true},
		{"allOf", `{"allOf":[{"properties":{"a":{}},"required":["a"]},{"properties":{"b":{}},"required":["b"]}]}`, []string{"a", "b"}, []string{"a", "b"}, false},
		{"anyOf requires nothing for sure", `{"anyOf":[{"properties":{"a":{}},"required":["a"]},{"properties":{"b":{}}}]}`, nil, []string{"a", "b"}, false},
		{"draft-07 definitions", `{"$ref":"#/definitions/o","definitions":{"o":{"properties":{"x":{}},"required":["x"]}}}`, []string{"x"}, []string{"x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := At(schema(t, tc.schema))
			if diff := cmp.Diff(tc.required, n.Required(), cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("Required (-want +got):\n%s", diff)
			}
			props, closed := n.Properties()
			if !slices.Equal(props, tc.props) || closed != tc.closed {
				t.Errorf("Properties = %v, %v; want %v, %v", props, closed, tc.props, tc.closed)
			}
		})
	}
}

// Validate checks a value against the schema at a node, with $refs into the
// root's $defs still resolving.
func TestNodeValidate(t *testing.T) {
	for _, defs := range []string{"$defs", "definitions"} {
		t.Run(defs, func(t *testing.T) { testNodeValidate(t, defs) })
	}
}

func testNodeValidate(t *testing.T, defs string) {
	root := schema(t, strings.ReplaceAll(`{"type":"object","properties":{
		"title":{"type":"string"},"open":{},
		"meta":{"$ref":"#/DEFS/meta"},
		"user":{"$ref":"#/DEFS/user"}},
	"DEFS":{
		"meta":{"type":"object","properties":{"author":{"type":"string"}},"additionalProperties":false},
		"user":{"type":"object","properties":{"name":{"type":"string"},"friends":{"type":"array","items":{"$ref":"#/DEFS/user"}}}}}}`, "DEFS", defs))
	for _, tc := range []struct {
		path    string
		value   any
		ok      bool // checked
		invalid bool
	}{
		{"meta", map[string]any{"author": "a"}, true, false},
		{"meta", map[string]any{"author": "a", "x": 1.0}, true, true},
		{"user", map[string]any{"name": "a", "friends": []any{map[string]any{"name": 1.0}}}, true, true},
		{"title", 3.0, true, true},
		{"open", "anything", true, false},
		{"open.x", "anything", false, false},
	} {
		n, err := Walk(root, path(tc.path))
		if err != nil {
			t.Fatal(err)
		}
		verr, ok := n.Validate(tc.value)
		if ok != tc.ok || (verr != nil) != tc.invalid {
			t.Errorf("%s: Validate(%v) = %v, %v; want checked %v, invalid %v", tc.path, tc.value, verr, ok, tc.ok, tc.invalid)
		}
	}
}

func TestCleanError(t *testing.T) {
	for _, tc := range []struct {
		schema string
		value  any
		want   string
	}{
		{`{"type":"object","required":["a"]}`, map[string]any{}, `required: missing properties: ["a"]`},
		{`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"integer"}}}}}`, map[string]any{"a": map[string]any{"b": "x"}}, `a.b: type: x has type "string", want "integer"`},
		{`{"type":"object","properties":{"k":{"enum":["x","y"]}}}`, map[string]any{"k": "z"}, `k: enum: z does not equal any of: [x y]`},
	} {
		rs, err := Resolve(schema(t, tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		verr := rs.Validate(tc.value)
		if verr == nil {
			t.Fatalf("%s accepts %v", tc.schema, tc.value)
		}
		if got := CleanError(verr); got != tc.want {
			t.Errorf("CleanError(%q) = %q, want %q", verr, got, tc.want)
		}
	}
	if got := CleanError(errors.New("plain")); got != "plain" {
		t.Errorf("CleanError of a plain error = %q", got)
	}
}

func TestValueType(t *testing.T) {
	for v, want := range map[any]string{nil: "null", true: "boolean", 1.0: "integer", 1.5: "number", "s": "string"} {
		if got := ValueType(v); got != want {
			t.Errorf("ValueType(%v) = %q, want %q", v, got, want)
		}
	}
	if ValueType([]any{}) != "array" || ValueType(map[string]any{}) != "object" {
		t.Errorf("ValueType of containers is wrong")
	}
}
