package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
)

func TestNormalizeSchema(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    string // the normalized schema as JSON
		valid   []string
		invalid []string
		wantErr string
	}{
		{
			name: "draft-07 from zod-to-json-schema",
			raw: `{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"number","description":"first N lines"}},
				"required":["path"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`,
			want: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["path"],"additionalProperties":false,
				"properties":{"path":{"type":"string"},"head":{"type":"number","description":"first N lines"}}}`,
			valid:   []string{`{"path":"a"}`, `{"path":"a","head":3}`},
			invalid: []string{`{}`, `{"path":"a","x":1}`, `{"path":1}`},
		},
		{
			name: "2020-12 with $defs and $ref",
			raw: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
				"properties":{"entities":{"type":"array","items":{"$ref":"#/$defs/entity"}}},
				"$defs":{"entity":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`,
			valid:   []string{`{"entities":[{"name":"a"}]}`},
			invalid: []string{`{"entities":[{}]}`},
		},
		{
			name: "draft-07 definitions and $ref",
			raw: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
				"properties":{"obs":{"$ref":"#/definitions/obs"}},
				"definitions":{"obs":{"type":"array","items":{"type":"string"}}}}`,
			valid:   []string{`{"obs":["a"]}`},
			invalid: []string{`{"obs":[1]}`},
		},
		{
			name: "python type names and required on properties",
			raw: `{"properties":{"q":{"type":"str","required":true},"n":{"type":"int","required":false},
				"opts":{"type":"dict"},"tags":{"type":"list","items":{"type":"str"}},"ratio":{"type":"float"},"on":{"type":"bool"}}}`,
			want: `{"type":"object","required":["q"],"properties":{"q":{"type":"string"},"n":{"type":"integer"},"opts":{"type":"object"},
				"tags":{"type":"array","items":{"type":"string"}},"ratio":{"type":"number"},"on":{"type":"boolean"}}}`,
			valid:   []string{`{"q":"x","n":1,"tags":["a"],"on":true}`},
			invalid: []string{`{"n":1}`, `{"q":"x","n":1.5}`},
		},
		{
			name:  "empty schema is an object",
			raw:   `{}`,
			want:  `{"type":"object"}`,
			valid: []string{`{}`, `{"anything":1}`},
		},
		{
			name: "type list with unknown and upper-case names",
			raw:  `{"type":"object","properties":{"v":{"type":["String","None","mystery"]}}}`,
			want: `{"type":"object","properties":{"v":{"type":["string","null"]}}}`,
		},
		{
			name: "unknown type name only",
			raw:  `{"type":"object","properties":{"v":{"type":"any"}}}`,
			want: `{"type":"object","properties":{"v":true}}`, // an empty schema marshals as true
		},
		{
			name: "openapi nullable",
			raw:  `{"type":"object","properties":{"v":{"type":"string","nullable":true}}}`,
			want: `{"type":"object","properties":{"v":{"type":["string","null"]}}}`,
		},
		{
			name: "draft-04 boolean exclusive bounds and id",
			raw: `{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://example.com/x","type":"object",
				"properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":10,"exclusiveMaximum":false}}}`,
			want:    `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0,"maximum":10}}}`,
			valid:   []string{`{"n":10}`},
			invalid: []string{`{"n":0}`},
		},
		{
			name: "bare type names where schemas belong",
			raw:  `{"type":"object","properties":{"a":"string","b":"int","c":42}}`,
			want: `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":true}}`,
		},
		{
			name:  "patterns Go cannot compile are dropped",
			raw:   `{"type":"object","properties":{"pw":{"type":"string","pattern":"^(?=.*\\d).{8,}$"},"id":{"type":"string","pattern":"^[a-z]+$"}}}`,
			want:  `{"type":"object","properties":{"pw":{"type":"string"},"id":{"type":"string","pattern":"^[a-z]+$"}}}`,
			valid: []string{`{"pw":"x","id":"abc"}`},
		},
		{
			name: "remote refs are dropped",
			raw:  `{"type":"object","properties":{"x":{"$ref":"https://example.com/schemas/x.json"}}}`,
			want: `{"type":"object","properties":{"x":true}}`,
		},
		{
			name: "unknown $schema and vocabulary",
			raw:  `{"$schema":"https://example.com/my-dialect","$vocabulary":{"x":true},"type":"object"}`,
			want: `{"type":"object"}`,
		},
		{
			name: "bad integer keywords and non-list required",
			raw:  `{"type":"object","required":"name","properties":{"s":{"type":"string","minLength":-1,"maxLength":2.5}},"minProperties":"1"}`,
			want: `{"type":"object","properties":{"s":{"type":"string"}}}`,
		},
		{
			name:  "integer and number together",
			raw:   `{"type":"object","properties":{"n":{"type":["integer","number"]}}}`,
			want:  `{"type":"object","properties":{"n":{"type":"number"}}}`,
			valid: []string{`{"n":1.5}`},
		},
		{
			name: "2019-09 tuple items read as draft-07",
			raw: `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object",
				"properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}]}}}`,
			valid:   []string{`{"pair":["a",1]}`},
			invalid: []string{`{"pair":[1,"a"]}`},
		},
		{
			name:  "anyOf with oddities inside",
			raw:   `{"type":"object","properties":{"v":{"anyOf":[{"type":"str"},{"type":"list","items":"int"}]}}}`,
			want:  `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"integer"}}]}}}`,
			valid: []string{`{"v":"a"}`, `{"v":[1]}`},
		},
		{
			name:    "dangling local ref cannot be used",
			raw:     `{"type":"object","properties":{"x":{"$ref":"#/definitions/missing"}}}`,
			wantErr: `$ref "#/definitions/missing" points at nothing`,
		},
		// A downstream server's hostile schemas: a walk of any of them
		// overflowed the stack and killed the process.
		{
			name:    "an object schema that refers to itself",
			raw:     `{"type":"object","$ref":"#"}`,
			wantErr: "refers to itself",
		},
		{
			name:    "a $defs cycle",
			raw:     `{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"v":{"$ref":"#/$defs/a"}}}`,
			wantErr: "refers to itself",
		},
		{
			name:    "allOf naming the schema itself",
			raw:     `{"type":"object","allOf":[{"$ref":"#"}]}`,
			wantErr: "refers to itself",
		},
		{
			name:    "false accepts nothing",
			raw:     `false`,
			wantErr: "accepts nothing",
		},
		{
			name:    "a number is no schema",
			raw:     `42`,
			wantErr: "not an object",
		},
		{
			name:  "array output schema is kept",
			raw:   `{"type":"array","items":{"type":"string"}}`,
			want:  `{"type":"array","items":{"type":"string"}}`,
			valid: []string{`["a"]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw any
			if err := json.Unmarshal([]byte(tt.raw), &raw); err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(raw)
			s, err := NormalizeSchema(raw)
			if after, _ := json.Marshal(raw); string(after) != string(before) {
				t.Errorf("NormalizeSchema modified its argument")
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resolved, err := s.Resolve(nil)
			if err != nil {
				t.Fatalf("the normalized schema does not resolve: %v", err)
			}
			if tt.want != "" {
				if diff := cmp.Diff(decode(t, tt.want), decode(t, mustJSON(t, s))); diff != "" {
					t.Errorf("normalized schema (-want +got):\n%s", diff)
				}
			}
			for _, v := range tt.valid {
				if err := resolved.Validate(decode(t, v)); err != nil {
					t.Errorf("%s: %v", v, err)
				}
			}
			for _, v := range tt.invalid {
				if err := resolved.Validate(decode(t, v)); err == nil {
					t.Errorf("%s validated, want an error", v)
				}
			}
		})
	}
}

func TestNormalizeSchemaInputs(t *testing.T) {
	if s, err := NormalizeSchema(nil); s != nil || err != nil {
		t.Errorf("nil: %v, %v", s, err)
	}
	// Go-built maps with int values, raw JSON and schemas all work.
	for _, raw := range []any{
		map[string]any{"type": "object", "properties": map[string]any{"s": map[string]any{"type": "string", "maxLength": 3}}},
		json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","maxLength":3}}}`),
		&jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"s": {Type: "string", MaxLength: jsonschema.Ptr(3)}}},
	} {
		s, err := NormalizeSchema(raw)
		if err != nil {
			t.Fatalf("%T: %v", raw, err)
		}
		if got := s.Properties["s"].MaxLength; got == nil || *got != 3 {
			t.Errorf("%T: maxLength = %v, want 3", raw, got)
		}
	}
}

func TestIsObjectSchema(t *testing.T) {
	for _, tt := range []struct {
		s    *jsonschema.Schema
		want bool
	}{
		{&jsonschema.Schema{Type: "object"}, true},
		{&jsonschema.Schema{Types: []string{"object", "null"}}, true},
		{&jsonschema.Schema{Type: "array"}, false},
		{&jsonschema.Schema{}, false},
		{&jsonschema.Schema{Types: []string{"object", "string"}}, false},
	} {
		if got := isObjectSchema(tt.s); got != tt.want {
			t.Errorf("isObjectSchema(%v) = %v", tt.s, got)
		}
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
