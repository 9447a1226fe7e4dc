package schemaload

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

func TestLoadRefuses(t *testing.T) {
	doubling := func(levels int) string {
		var b strings.Builder
		b.WriteString(`{"$defs":{`)
		for i := range levels {
			fmt.Fprintf(&b, `"a%d":{"allOf":[{"$ref":"#/$defs/a%d"},{"$ref":"#/$defs/a%d"}]},`, i, i+1, i+1)
		}
		fmt.Fprintf(&b, `"a%d":{"type":"object"}},"$ref":"#/$defs/a0"}`, levels)
		return b.String()
	}
	propsDoubling := func(levels int) string {
		var b strings.Builder
		b.WriteString(`{"$defs":{`)
		for i := range levels {
			fmt.Fprintf(&b, `"a%d":{"type":"object","properties":{"x":{"$ref":"#/$defs/a%d"},"y":{"$ref":"#/$defs/a%d"}}},`, i, i+1, i+1)
		}
		fmt.Fprintf(&b, `"a%d":{"type":"string"}},"$ref":"#/$defs/a0"}`, levels)
		return b.String()
	}
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"self reference", `{"$ref": "#"}`, "refers to itself without descending into a value (# → #)"},
		{"object with self reference", `{"type": "object", "$ref": "#"}`, "refers to itself without descending"},
		{"defs cycle", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`, "#/$defs/a → #/$defs/b → #/$defs/a"},
		{"allOf self", `{"allOf": [{"$ref": "#"}]}`, "# → #/allOf/0 → #"},
		{"anchor cycle", `{"$anchor": "top", "anyOf": [{"$ref": "#top"}]}`, "refers to itself"},
		{"not self", `{"properties": {"a": {"not": {"$ref": "#/properties/a"}}}}`, "refers to itself"},
		{"remote ref", `{"$ref": "https://example.com/schema.json"}`, "points outside the schema"},
		{"dangling ref", `{"$ref": "#/$defs/missing"}`, `at #: $ref "#/$defs/missing" points at nothing`},
		{"unknown anchor", `{"$ref": "#nowhere"}`, "names no $anchor"},
		{"fan-out", doubling(22), "applies more than 1000 schemas at once"},
		{"expansion", propsDoubling(22), "expands to more than 20000 sub-schemas"},
		{"deep", strings.Repeat(`{"items":`, 200) + `{}` + strings.Repeat(`}`, 200), "nested deeper than the limit of 128 levels"},
		{"large", `{"enum": [` + strings.Repeat(`"xxxxxxxxxx",`, 100_000) + `"x"]}`, "larger than the limit of 1048576 bytes"},
		{"wide", `{"enum": [` + strings.Repeat(`1,`, 150_000) + `1]}`, "more than the limit of 100000 values"},
		{"not a schema", `[1, 2]`, "not a JSON Schema"},
		{"bad pattern", `{"pattern": "(?<=a)b"}`, "does not resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(`client tool "ct" input_schema`, json.RawMessage(tc.schema), DefaultLimits())
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			if !strings.HasPrefix(err.Error(), `client tool "ct" input_schema: `) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to name the source and say %q", err, tc.want)
			}
			if _, ok := AsError(err); !ok {
				t.Fatalf("error %T is not a *schemaload.Error", err)
			}
		})
	}
}

func TestLoadAccepts(t *testing.T) {
	for _, tc := range []struct{ name, schema string }{
		{"object", `{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}`},
		{"recursive tree", `{"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`},
		{"root recursion through properties", `{"type": "object", "properties": {"next": {"$ref": "#"}}}`},
		{"draft-07 definitions", `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "integer"}}, "properties": {"x": {"$ref": "#/definitions/a"}}}`},
		{"anchor", `{"$defs": {"a": {"$anchor": "num", "type": "number"}}, "properties": {"x": {"$ref": "#num"}}}`},
		{"pointer into properties", `{"properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}}`},
		{"booleans", `{"properties": {"a": true, "b": false}, "additionalProperties": false}`},
		{"nested $id dropped", `{"$id": "https://example.com/root", "properties": {"a": {"$id": "sub", "$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}}`},
		{"shared definitions", `{"$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}, "c": {"allOf": [{"$ref": "#/$defs/s"}, {"$ref": "#/$defs/s"}]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load("test", json.RawMessage(tc.schema), DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				t.Fatal("no schema")
			}
		})
	}
	if s, err := Load("test", nil, DefaultLimits()); s != nil || err != nil {
		t.Fatalf("Load(nil) = %v, %v; want nil, nil", s, err)
	}
	// A decoded value loads the same as its JSON.
	if _, err := Load("test", map[string]any{"$ref": "#"}, DefaultLimits()); err == nil {
		t.Fatal("a decoded self-referencing schema loaded")
	}
}

func TestCheckValue(t *testing.T) {
	exponential := `{"$defs": {"a": {"allOf": [{"properties": {"x": {"$ref": "#/$defs/a"}}}, {"properties": {"x": {"$ref": "#/$defs/a"}}}]}}, "$ref": "#/$defs/a"}`
	s, err := Load(`agent "a" output_schema`, json.RawMessage(exponential), DefaultLimits())
	if err != nil {
		t.Fatalf("the schema itself is finite and loads: %v", err)
	}
	deep := func(d int) any {
		var v any = 1.0
		for range d {
			v = map[string]any{"x": v}
		}
		return v
	}
	if err := CheckValue(s, s, deep(5)); err != nil {
		t.Fatalf("a shallow value: %v", err)
	}
	err = CheckValue(s, s, deep(40))
	if err == nil || !strings.Contains(err.Error(), `agent "a" output_schema`) {
		t.Fatalf("a 40-deep value (2^40 evaluations): %v, want an error naming the schema", err)
	}

	tree, err := Load("tree", json.RawMessage(`{"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	// A tree of 300,000 nodes: linear work, within the per-value budget.
	var build func(d int) any
	build = func(d int) any {
		if d == 0 {
			return map[string]any{}
		}
		kids := make([]any, 4)
		for i := range kids {
			kids[i] = build(d - 1)
		}
		return map[string]any{"children": kids}
	}
	if err := CheckValue(tree, tree, build(9)); err != nil {
		t.Fatalf("a large tree against a recursive schema: %v", err)
	}
	arr, err := Load("numbers", json.RawMessage(`{"type": "array", "items": {"type": "number"}}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	big := make([]any, 400_000)
	for i := range big {
		big[i] = float64(i)
	}
	if err := CheckValue(arr, arr, big); err != nil {
		t.Fatalf("400,000 numbers against items: number: %v", err)
	}
	// A schema built in memory with a cycle is refused, never walked.
	cyc := &jsonschema.Schema{}
	cyc.AllOf = []*jsonschema.Schema{cyc}
	if err := CheckValue(cyc, cyc, 1.0); err == nil {
		t.Fatal("a cyclic in-memory schema passed")
	}
}

func TestDeref(t *testing.T) {
	s, err := Load("test", json.RawMessage(`{"$defs": {"a/b": {"$anchor": "ab", "type": "string"}}, "properties": {"x": {"items": [{"type": "integer"}]}}}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  string
		want *jsonschema.Schema
	}{
		{"#", s},
		{"#/$defs/a~1b", s.Defs["a/b"]},
		{"#ab", s.Defs["a/b"]},
		{"#/properties/x/items/0", s.Properties["x"].ItemsArray[0]},
		{"#/properties/y", nil},
		{"other.json#/a", nil},
	} {
		if got := Deref(s, tc.ref); got != tc.want {
			t.Errorf("Deref(%q) = %p, want %p", tc.ref, got, tc.want)
		}
	}
}
