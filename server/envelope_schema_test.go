package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEnvelopesMatchTheOutputSchema calls agent_orchestrate for every kind
// of outcome, compact and full, and validates each structuredContent
// against the outputSchema the server publishes for it, as a client that
// checks results would, and against the complete envelope schema
// (schemas/envelope.json); every field an envelope carries must be
// declared in the complete one, so that a new field cannot reach clients
// undocumented.
func TestEnvelopesMatchTheOutputSchema(t *testing.T) {
	cs, tools := listedTools(t)
	var published []byte
	for _, tool := range tools {
		if tool.Name == "agent_orchestrate" {
			published, _ = json.Marshal(tool.OutputSchema)
		}
	}
	resolve := func(data []byte) (*jsonschema.Resolved, map[string]any) {
		var schema jsonschema.Schema
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatalf("the outputSchema %s: %v", data, err)
		}
		resolved, err := schema.Resolve(nil)
		if err != nil {
			t.Fatalf("resolving the outputSchema: %v", err)
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		return resolved, doc
	}
	lean, _ := resolve(published)
	raw, err := os.ReadFile("../schemas/envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	complete, doc := resolve(raw)

	fail := map[string]any{"id": "bad", "tool": "json_query", "arguments": map[string]any{"query": `"no" | error`, "input": map[string]any{}}}
	continued := map[string]any{"id": "bad", "on_error": "continue", "tool": "json_query", "arguments": map[string]any{"query": `"no" | error`, "input": map[string]any{}}}
	keyed := jq("k", 3)
	keyed["result_key"] = "three"
	withAnswer := map[string]any{"steps": []any{jq("a", 1)}, "answer": "a is ${a.output.result}", "return": "$a.output"}
	cases := []struct {
		name   string
		args   any
		status string
	}{
		{"success", map[string]any{"bindings": map[string]any{"who": "Ada"}, "plan": map[string]any{"steps": []any{
			jq("a", 1), map[string]any{"id": "g", "parallel": []any{jq("x", 2), keyed}}}}}, "success"},
		{"failed", map[string]any{"plan": map[string]any{"steps": []any{fail, jq("b", 2)}}}, "failed"},
		{"partial", map[string]any{"plan": map[string]any{"steps": []any{continued, jq("b", 2)}}}, "partial"},
		{"invalid", map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "nope", "arguments": map[string]any{"x": "$0.output.y"}}}}}, "failed"},
		{"rejected", map[string]any{"plan": 5}, "failed"},
		{"dry_run", map[string]any{"dry_run": true, "plan": map[string]any{"steps": []any{jq("a", 1)}}}, "success"},
		{"direct_response", map[string]any{"plan": map[string]any{"type": "direct_response", "content": "Hello."}}, "success"},
		{"loop and condition", map[string]any{"plan": map[string]any{"steps": []any{
			map[string]any{"id": "l", "for_each": []any{1, 0, 2}, "do": map[string]any{"when": "$item", "tool": "json_query", "arguments": map[string]any{"query": ". * 2", "input": "$item"}}},
			map[string]any{"when": "$l.output[1]", "tool": "json_query", "arguments": map[string]any{"query": ".", "input": 1}}}}}, "success"},
		{"loop over its limit", map[string]any{"plan": map[string]any{"steps": []any{
			map[string]any{"id": "a", "tool": "json_query", "arguments": map[string]any{"query": "[range(70)]", "input": nil}},
			map[string]any{"for_each": "$a.output.result", "do": map[string]any{"tool": "json_query", "arguments": map[string]any{"query": ".", "input": "$item"}}}}}}, "failed"},
		{"answer_and_return", map[string]any{"plan": withAnswer}, "success"},
		{"return_with_a_failure", map[string]any{"plan": map[string]any{"steps": []any{
			map[string]any{"id": "g", "parallel": []any{continued, jq("x", 2)}}, jq("a", 1)}, "return": "$a.output"}}, "partial"},
	}
	for _, mode := range []string{"compact", "full"} {
		for _, tc := range cases {
			args := maps.Clone(tc.args.(map[string]any))
			args["response"] = mode
			if tc.name == "rejected" {
				delete(args, "response") // the response of a request that does not decode is the server's default
			}
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				res, env := callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
				if got := env["artifact"].(map[string]any)["status"]; got != tc.status {
					t.Fatalf("status %v, want %s", got, tc.status)
				}
				if res.IsError != (tc.status != "success") {
					t.Errorf("isError %v for a %s run", res.IsError, tc.status)
				}
				if err := lean.Validate(env); err != nil {
					t.Errorf("the envelope does not match the published outputSchema: %v\n%s", err, mustJSON(t, env))
				}
				if err := complete.Validate(env); err != nil {
					t.Errorf("the envelope does not match the complete envelope schema: %v\n%s", err, mustJSON(t, env))
				}
				for _, p := range undeclared(doc, doc, env, "") {
					t.Errorf("the envelope carries %s, which the complete envelope schema does not declare", p)
				}
				want := 1
				if _, full := args["response"]; full && mode == "full" {
					want = 2
				}
				if len(res.Content) != want {
					t.Errorf("%d content blocks, want %d", len(res.Content), want)
				}
			})
		}
	}
}

// undeclared returns the paths of the fields of value that schema (a part
// of the schema document doc) does not list in its properties, at every
// depth.
func undeclared(doc, schema map[string]any, value any, at string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		name, _ := strings.CutPrefix(ref, "#/$defs/")
		def, _ := doc["$defs"].(map[string]any)[name].(map[string]any)
		return undeclared(doc, def, value, at)
	}
	var out []string
	if branches, ok := schema["anyOf"].([]any); ok {
		for _, b := range branches {
			if bm, ok := b.(map[string]any); ok && bm["type"] != "null" {
				out = append(out, undeclared(doc, bm, value, at)...)
			}
		}
	}
	switch v := value.(type) {
	case map[string]any:
		props, ok := schema["properties"].(map[string]any)
		if !ok {
			return out // a free-form object (bindings, arguments, outputs)
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			sub, declared := props[k].(map[string]any)
			if !declared {
				out = append(out, at+"."+k)
				continue
			}
			out = append(out, undeclared(doc, sub, v[k], at+"."+k)...)
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range v {
				out = append(out, undeclared(doc, items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return out
}
