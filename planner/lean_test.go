package planner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/registry"
)

func decodeJSON(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// lean drops titles, defaults, descriptions that repeat the property's
// name and additionalProperties: true (loose only), and keeps properties
// that happen to be called title or default and every description that
// says more than the name.
func TestLeanSchema(t *testing.T) {
	in := decodeJSON(t, `{"type":"object","title":"Args","additionalProperties":true,"properties":{
		"currencyCode":{"type":"string","title":"Currency Code","description":"Currency code."},
		"user_id":{"type":"string","description":"The user ID"},
		"adults":{"type":"number","default":1,"description":"Adults: 12+ years. Default value: 1"},
		"cabinClass":{"type":"string","description":"Cabin class. Default value: economy"},
		"limit":{"type":"integer","description":"Default value: 10"},
		"title":{"type":"string","description":"The post's title, shown on top."},
		"default":{"type":"boolean"},
		"tags":{"type":"array","items":{"type":"object","title":"Tag","additionalProperties":true,"properties":{"name":{"type":"string","description":"Name."}}}}}}`)
	want := decodeJSON(t, `{"type":"object","properties":{
		"currencyCode":{"type":"string"},
		"user_id":{"type":"string"},
		"adults":{"type":"number","description":"Adults: 12+ years."},
		"cabinClass":{"type":"string"},
		"limit":{"type":"integer"},
		"title":{"type":"string","description":"The post's title, shown on top."},
		"default":{"type":"boolean"},
		"tags":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}`)
	if diff := cmp.Diff(want, lean(in, true)); diff != "" {
		t.Errorf("lean, loose (-want +got):\n%s", diff)
	}
	strict := lean(in, false)
	if strict["additionalProperties"] != true {
		t.Error("lean for a strict schema dropped additionalProperties: true, which strict modes must see to refuse")
	}
	if in["title"] != "Args" {
		t.Error("lean changed its input")
	}
}

func TestWithoutDefault(t *testing.T) {
	for in, want := range map[string]string{
		"Market code. Default value: en-US":          "Market code.",
		"Number of results (default: 10)":            "Number of results",
		"Sort order, defaults to asc":                "Sort order",
		"Currency code. Defaults to USD.":            "Currency code.",
		"The default branch name":                    "The default branch name",
		"Page number. The default page number is 1.": "Page number. The default page number is 1.",
	} {
		if got := withoutDefault(in); got != want {
			t.Errorf("withoutDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

// Output fields are listed compactly: strings bare, other types named,
// objects and arrays of objects nested, an array output as []{...}; over
// the cap, shallow fields first, and what is left out counted.
func TestFieldList(t *testing.T) {
	for _, c := range []struct {
		name, schema, want  string
		limit, named, total int
	}{
		{"nested", `{"type":"object","properties":{"id":{"type":"string"},"score":{"type":"number"},
			"items":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}},
			"meta":{"type":"object","properties":{"lang":{"type":["string","null"]}}},"raw":{"type":"object"}}}`,
			"id, items[]{tags: array of string, url}, meta{lang: string | null}, raw: object, score: number", 24, 8, 8},
		{"array output", `{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"size":{"type":"integer"}}}}`,
			"[]{name, size: integer}", 24, 2, 2},
		{"capped", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"object","properties":{"d":{"type":"string"}}}}}`,
			"a, b", 2, 2, 4},
		{"shallow first", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"c":{"type":"string"},"d":{"type":"string"}}},"e":{"type":"number"}}}`,
			"a, b: object, e: number", 3, 3, 5},
		{"references", `{"type":"object","$defs":{"u":{"type":"object","properties":{"id":{"type":"integer"}}}},"properties":{"user":{"$ref":"#/$defs/u"}}}`,
			"user{id: integer}", 24, 2, 2},
	} {
		got, named, total := fieldList(decodeJSON(t, c.schema), c.limit)
		if got != c.want || named != c.named || total != c.total {
			t.Errorf("%s: fieldList = %q, %d named of %d; want %q, %d of %d", c.name, got, named, total, c.want, c.named, c.total)
		}
	}
}

// What the loose planning schema no longer says per tool and per
// argument, the prompt says once: the step fields, the group, the
// schedule, and that a template may stand for any argument.
func TestLooseSchemaLeavesToPrompt(t *testing.T) {
	tools := []registry.Tool{{Name: "count", Description: "Count words.",
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
			"n":    {Type: "integer", Title: "N", Description: "N."},
			"text": {Type: "string", Default: json.RawMessage(`"x"`)}}}}}
	pt := Build(1, tools, BuildOptions{})
	if pt.Strict == nil {
		t.Fatalf("no strict schema: %v", pt.StrictProblems)
	}
	loose, _ := json.Marshal(pt.Loose)
	for _, absent := range []string{`"result_key"`, `"on_error"`, `"retry"`, `"title"`, `"default"`, `"N."`, `["integer","string"]`} {
		if strings.Contains(string(loose), absent) {
			t.Errorf("the loose schema has %s: %s", absent, loose)
		}
	}
	for _, taught := range []string{`"result_key"`, `"on_error": "continue"`, `"retry"`, `{"parallel": [call, call]`, `"schedule": "dag"`, "A template may stand for any argument", `"answer"`} {
		if !strings.Contains(pt.Prompt, taught) {
			t.Errorf("the prompt does not teach %s", taught)
		}
	}
	strict, _ := json.Marshal(pt.Strict)
	for _, kept := range []string{`"result_key"`, `"on_error"`, `"retry"`, `"max_attempts"`} {
		if !strings.Contains(string(strict), kept) {
			t.Errorf("the strict schema lost %s", kept)
		}
	}
}
