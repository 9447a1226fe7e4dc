package schemas

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
)

// Every boolean sub-schema becomes the object it stands for, wherever a
// schema object is expected, and nothing else changes: not the booleans of
// additionalProperties and its kin, not values that only look like schemas
// (enum, const, default, a property named like a keyword), not the order
// of keys.
func TestPortable(t *testing.T) {
	const in = `{"type":"object","properties":{"z":true,"a":{"type":"array","items":true},"items":{"enum":[true,false],"default":true,"const":false},` +
		`"t":{"type":"array","items":[true,{"type":"string"}],"additionalItems":false},"m":{"type":"object","additionalProperties":true,"propertyNames":true}},` +
		`"patternProperties":{"^x":false},"$defs":{"any":true},"definitions":{"none":false},"allOf":[true],"anyOf":[{"not":true}],"oneOf":[false],` +
		`"if":true,"then":false,"else":true,"dependencies":{"a":["z"],"z":true},"dependentSchemas":{"a":false},"prefixItems":[true],"contains":true,` +
		`"unevaluatedProperties":false,"examples":[true],"required":["a"]}`
	const want = `{"type":"object","properties":{"z":{},"a":{"type":"array","items":{}},"items":{"enum":[true,false],"default":true,"const":false},` +
		`"t":{"type":"array","items":[{},{"type":"string"}],"additionalItems":false},"m":{"type":"object","additionalProperties":true,"propertyNames":{}}},` +
		`"patternProperties":{"^x":{"not":{}}},"$defs":{"any":{}},"definitions":{"none":{"not":{}}},"allOf":[{}],"anyOf":[{"not":{}}],"oneOf":[{"not":{}}],` +
		`"if":{},"then":{"not":{}},"else":{},"dependencies":{"a":["z"],"z":{}},"dependentSchemas":{"a":{"not":{}}},"prefixItems":[{}],"contains":{},` +
		`"unevaluatedProperties":false,"examples":[true],"required":["a"]}`
	found, err := BooleanSubschemas([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	wantFound := []string{"/properties/z", "/properties/a/items", "/properties/t/items/0",
		"/properties/m/propertyNames", "/patternProperties/^x", "/$defs/any",
		"/definitions/none", "/allOf/0", "/anyOf/0/not", "/oneOf/0", "/if", "/then", "/else", "/dependencies/z",
		"/dependentSchemas/a", "/prefixItems/0", "/contains"}
	if !slices.Equal(found, wantFound) {
		t.Errorf("BooleanSubschemas found\n%v\nwant\n%v", found, wantFound)
	}
	out, err := rewrite([]byte(in), roleSchema, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Errorf("rewritten\n%s\nwant\n%s", out, want)
	}
	if again, _ := BooleanSubschemas(out); len(again) != 0 {
		t.Errorf("booleans left at %v", again)
	}
	// The meaning is kept: {} and {"not": {}} are true and false.
	var before, after jsonschema.Schema
	if err := json.Unmarshal([]byte(in), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(&before)
	b2, _ := json.Marshal(&after)
	if string(b1) != string(b2) {
		t.Errorf("the rewritten schema means something else:\n%s\n%s", b1, b2)
	}
}

// Portable writes a schema jsonschema-go would send with true in it.
func TestPortableSchema(t *testing.T) {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"b": {}, "a": {Type: "array", Items: &jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}},
	}, PropertyOrder: []string{"b", "a"}}
	data, _ := json.Marshal(s)
	if found, _ := BooleanSubschemas(data); len(found) != 2 {
		t.Fatalf("jsonschema-go wrote %s; the test expects two bare true", data)
	}
	out, err := Portable(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"object","properties":{"b":{},"a":{"type":"array","items":{},"additionalProperties":false}}}`; string(out) != want {
		t.Errorf("Portable = %s, want %s", out, want)
	}
}

// A schema of arrays without items gets "items": {} wherever it is, and
// one with items, or of another type, is left alone.
func TestPortableItems(t *testing.T) {
	const in = `{"type":"object","properties":{"a":{"type":"array"},"n":{"type":["null","array"],"description":"x"},` +
		`"t":{"type":"array","items":{"type":"string"}},"s":{"type":"string"},"o":{"anyOf":[{"type":"array"}]}},` +
		`"$defs":{"d":{"type":"array","minItems":1}}}`
	const want = `{"type":"object","properties":{"a":{"type":"array","items":{}},"n":{"type":["null","array"],"description":"x","items":{}},` +
		`"t":{"type":"array","items":{"type":"string"}},"s":{"type":"string"},"o":{"anyOf":[{"type":"array","items":{}}]}},` +
		`"$defs":{"d":{"type":"array","minItems":1,"items":{}}}}`
	out, err := rewrite([]byte(in), roleSchema, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Errorf("rewritten\n%s\nwant\n%s", out, want)
	}
}

// PortableInput folds a combinator at the top of an input schema into it:
// the branches' properties join the top's without replacing its own, an
// allOf's required names join the top's, a oneOf's do not, and a schema
// without a type becomes an object schema. Without a combinator it is
// Portable.
func TestPortableInput(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"oneOf",
			`{"type":"object","properties":{"a":{"type":"string"},"list":{"type":"array"}},"required":["list"],"oneOf":[{"properties":{"a":{}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"list":{"type":"array","items":{}},"b":{"type":"integer"}},"required":["list"]}`},
		{"allOf without a type",
			`{"allOf":[{"properties":{"x":{"type":"string"}},"required":["x"]},{"$ref":"#/$defs/y"}],"$defs":{"y":{"type":"object"}}}`,
			`{"type":"object","$defs":{"y":{"type":"object"}},"properties":{"x":{"type":"string"}},"required":["x"]}`},
		{"anyOf of booleans", `{"type":"object","anyOf":[true,false]}`, `{"type":"object"}`},
		{"plain", `{"type":"object","properties":{"q":{"type":"string"}}}`, `{"type":"object","properties":{"q":{"type":"string"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s jsonschema.Schema
			if err := json.Unmarshal([]byte(tc.in), &s); err != nil {
				t.Fatal(err)
			}
			out, err := PortableInput(&s)
			if err != nil {
				t.Fatal(err)
			}
			// jsonschema-go orders the members it writes; compare meaning.
			var got, want any
			_ = json.Unmarshal(out, &got)
			_ = json.Unmarshal([]byte(tc.want), &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PortableInput = %s (-want +got):\n%s", out, diff)
			}
		})
	}
}
