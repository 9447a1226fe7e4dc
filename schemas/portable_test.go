package schemas

import (
	"encoding/json"
	"slices"
	"testing"

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
