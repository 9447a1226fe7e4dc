package server_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
)

// The rules of the model APIs an MCP client hands orchestra's tools to. A
// client sends each listed tool's name, description and input schema to
// its model's API as a tool (function) definition, and a definition the API
// refuses costs the tool (Claude Code 2.1.197 skips it, logging only in its
// debug log) or the whole request (the API's 400 repeats on every turn).
//
// Anthropic, Messages API, "Define tools"
// (https://platform.claude.com/docs/agents-and-tools/tool-use/define-tools):
// a tool's name matches ^[a-zA-Z0-9_-]{1,128}$ and its input_schema is "a
// JSON Schema object defining the expected parameters"; the API answers a
// schema of type other than object, or with a combinator at its top, with
// 400 "tools.N.custom.input_schema: input_schema does not support oneOf,
// allOf, or anyOf at the top level".
//
// OpenAI, "Function calling"
// (https://developers.openai.com/docs/guides/function-calling) and the
// Chat Completions reference of a function: the name is "a-z, A-Z, 0-9, or
// contain underscores and dashes, with a maximum length of 64", parameters
// are "described as a JSON Schema object"; the API refuses parameters
// with 400 invalid_function_parameters "schema must have type 'object'
// and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level" and,
// anywhere in the schema, "array schema missing items".
//
// Clients add their own: a bare true or false where a schema object is
// expected is refused by several (TestNoBooleanSubschemas), and Mastra 0.x
// overflows its stack on a recursive $ref; orchestra's own schemas have
// none.
var (
	// toolNamePattern is the stricter of the two APIs' name rules.
	toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// topLevelRefused are the keywords neither API takes at the top of a
	// tool's input schema.
	topLevelRefused = []string{"oneOf", "anyOf", "allOf", "enum", "not"}
)

// modelAPIProblems returns what the model APIs refuse in a tool's
// definition as a client decoded it: its name (unless the name is not
// orchestra's to choose) and its input and output schemas.
func modelAPIProblems(t *testing.T, tool *mcp.Tool, checkName bool) []string {
	t.Helper()
	var out []string
	if checkName && !toolNamePattern.MatchString(tool.Name) {
		out = append(out, fmt.Sprintf("name %q does not match %s", tool.Name, toolNamePattern))
	}
	in := asJSONObject(t, tool.InputSchema)
	if in == nil {
		return append(out, "inputSchema is not a JSON object")
	}
	if in["type"] != "object" {
		out = append(out, fmt.Sprintf("inputSchema has type %v, not object", in["type"]))
	}
	for _, k := range topLevelRefused {
		if _, ok := in[k]; ok {
			out = append(out, "inputSchema has "+k+" at its top")
		}
	}
	out = append(out, schemaProblems("inputSchema", in, in)...)
	if tool.OutputSchema != nil {
		o := asJSONObject(t, tool.OutputSchema)
		if o == nil || o["type"] != "object" {
			out = append(out, "outputSchema is not an object schema")
		} else {
			out = append(out, schemaProblems("outputSchema", o, o)...)
		}
	}
	return out
}

// schemaProblems walks every sub-schema of s (at JSON pointer at, within
// root) and reports arrays without items, boolean sub-schemas and $refs
// that lead back to a schema they are in.
func schemaProblems(at string, s any, root map[string]any) []string {
	var out []string
	var walk func(at string, v any, refs []string)
	walk = func(at string, v any, refs []string) {
		m, ok := v.(map[string]any)
		if !ok {
			out = append(out, fmt.Sprintf("%s is %v, not a schema object", at, v))
			return
		}
		if allowsArrays(m["type"]) && m["items"] == nil {
			out = append(out, at+" is an array schema without items")
		}
		if ref, ok := m["$ref"].(string); ok {
			if slices.Contains(refs, ref) {
				out = append(out, fmt.Sprintf("%s: $ref %s is recursive", at, ref))
				return
			}
			if target := resolvePointer(root, ref); target != nil {
				walk(at+"→"+ref, target, append(refs, ref))
			}
		}
		for _, k := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"} {
			if members, ok := m[k].(map[string]any); ok {
				for name, sub := range members {
					walk(at+"/"+k+"/"+name, sub, refs)
				}
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
			if list, ok := m[k].([]any); ok {
				for i, sub := range list {
					walk(fmt.Sprintf("%s/%s/%d", at, k, i), sub, refs)
				}
			}
		}
		for _, k := range []string{"not", "if", "then", "else", "contains", "propertyNames"} {
			if sub, ok := m[k]; ok {
				walk(at+"/"+k, sub, refs)
			}
		}
		switch items := m["items"].(type) {
		case []any:
			for i, sub := range items {
				walk(fmt.Sprintf("%s/items/%d", at, i), sub, refs)
			}
		case nil:
		default:
			walk(at+"/items", items, refs)
		}
		for _, k := range []string{"additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems"} {
			if sub, ok := m[k].(map[string]any); ok { // a boolean is read by every client
				walk(at+"/"+k, sub, refs)
			}
		}
	}
	walk(at, s, nil)
	return out
}

func allowsArrays(typ any) bool {
	switch t := typ.(type) {
	case string:
		return t == "array"
	case []any:
		return slices.Contains(t, any("array"))
	}
	return false
}

// resolvePointer returns what a local $ref ("#/$defs/x") names in root.
func resolvePointer(root map[string]any, ref string) any {
	path, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	var v any = root
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if seg == "" {
			continue
		}
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[seg]
	}
	return v
}

func asJSONObject(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// TestPublishedToolsFollowModelAPIRules lists every kind of tool orchestra
// publishes — agent_orchestrate, orchestra_tools, the built-ins with
// http_request, an exposed agent, and the tools of real downstream servers
// (filesystem, everything, memory from npm, and a fixture whose schema has
// a top-level oneOf, an array without items and a bare true) — through a
// real client, and checks each definition against the model APIs' rules.
// orchestra's own tools follow them as written; a downstream tool's
// input schema is published in the form the APIs take
// (schemas.PortableInput: the oneOf folded into the top, items added,
// booleans made objects), its name as the server gave it (a client
// prefixes and sanitizes the names of its servers' tools). The tools a
// plan calls that tools/list does not show (ask_user) are described by
// orchestra_tools, and their schemas follow the rules too.
func TestPublishedToolsFollowModelAPIRules(t *testing.T) {
	servers := map[string]mcpserver.ServerConfig{
		"fs":  npmServer(t, "server-filesystem", t.TempDir()),
		"ev":  npmServer(t, "server-everything"),
		"mem": npmServer(t, "server-memory"),
		"fx":  {Command: fixture(t)},
	}
	_, cs := downstreamAppWith(t, servers, nil, func(cfg *config.Config) {
		cfg.Builtins.HTTP.AllowedHosts = []string{"api.example.com"}
		cfg.Agents = map[string]agents.Config{"counter": {
			Description: "Counts things.", Instructions: "Count.", Tools: []string{"json_query"}, Expose: true,
			OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"tags": map[string]any{"type": "array"}}},
			Actions: map[string]agents.Action{"count": {Description: "Counts a list.", Prompt: "Count {{.list}}.",
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"list": map[string]any{"type": "array"}}}}},
		}}
	})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	var ours []string
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
		_, _, downstream := strings.Cut(tool.Name, "__")
		downstream = downstream && !strings.HasPrefix(tool.Name, agents.ToolName(""))
		if !downstream {
			ours = append(ours, tool.Name)
		}
		for _, p := range modelAPIProblems(t, tool, !downstream) {
			t.Errorf("%s: %s", tool.Name, p)
		}
	}
	for _, want := range []string{"agent_orchestrate", "orchestra_tools", "json_query", "render", "http_request", "agent__counter", "fs__read_text_file", "ev__echo", "mem__create_entities", "fx__one_of"} {
		if byName[want] == nil {
			t.Errorf("tools/list has no %s", want)
		}
	}
	t.Logf("checked %d tools, %d of them orchestra's own: %v", len(res.Tools), len(ours), ours)

	// agent_orchestrate: no branch redeclares plan, prompt or resume, and
	// no $ref or $defs remain (the step schema is written out, not recursive).
	if ao := byName["agent_orchestrate"]; ao != nil {
		in := asJSONObject(t, ao.InputSchema)
		props, _ := in["properties"].(map[string]any)
		for _, p := range []string{"plan", "prompt", "resume"} {
			if m, _ := props[p].(map[string]any); m["type"] == nil {
				t.Errorf("agent_orchestrate's %s has no type: %v", p, props[p])
			}
		}
		if data, _ := json.Marshal(in); strings.Contains(string(data), "$ref") || strings.Contains(string(data), "$defs") {
			t.Errorf("agent_orchestrate's input schema refers to definitions: %s", data)
		}
		if !strings.Contains(ao.Description, `Send one of "plan", "prompt" (a goal) or "resume"`) {
			t.Errorf("agent_orchestrate's description does not say that a call sends one of plan, prompt or resume")
		}
	}

	// The fixture's oneOf is folded: the top keeps its own a, gains the
	// branch's b, requires neither, and ids gets items.
	if fx := byName["fx__one_of"]; fx != nil {
		in := asJSONObject(t, fx.InputSchema)
		props, _ := in["properties"].(map[string]any)
		if a, _ := props["a"].(map[string]any); a["description"] != "the top's own a" {
			t.Errorf("the branch's a replaced the top's: %v", props["a"])
		}
		if b, _ := props["b"].(map[string]any); b["type"] != "integer" {
			t.Errorf("the branch's b is not published: %v", props)
		}
		if in["required"] != nil {
			t.Errorf("a oneOf branch's required names became the top's: %v", in["required"])
		}
	}

	// What orchestra_tools says of the unlisted tools follows the rules too.
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "orchestra_tools", Arguments: map[string]any{"names": []string{"ask_user"}}})
	if err != nil || r.IsError {
		t.Fatalf("orchestra_tools: %v %v", err, r)
	}
	var described struct {
		Tools []struct {
			Name         string `json:"name"`
			Description  string `json:"description"`
			InputSchema  any    `json:"input_schema"`
			OutputSchema any    `json:"output_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &described); err != nil || len(described.Tools) != 1 {
		t.Fatalf("orchestra_tools described %v (%v)", described, err)
	}
	d := described.Tools[0]
	for _, p := range modelAPIProblems(t, &mcp.Tool{Name: d.Name, InputSchema: d.InputSchema, OutputSchema: d.OutputSchema}, true) {
		t.Errorf("%s (described by orchestra_tools): %s", d.Name, p)
	}
}

// The rule check finds what it is for: each kind of problem in a schema
// the model APIs refuse.
func TestModelAPIRulesFindProblems(t *testing.T) {
	tool := &mcp.Tool{
		Name: "bad.name",
		InputSchema: map[string]any{"type": "object", "oneOf": []any{map[string]any{}},
			"properties": map[string]any{"list": map[string]any{"type": []any{"null", "array"}}, "t": true,
				"node": map[string]any{"$ref": "#/$defs/node"}},
			"$defs": map[string]any{"node": map[string]any{"type": "object", "properties": map[string]any{"next": map[string]any{"$ref": "#/$defs/node"}}}}},
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"errors": map[string]any{"type": "array"}}},
	}
	got := strings.Join(modelAPIProblems(t, tool, true), "\n")
	for _, want := range []string{`name "bad.name"`, "oneOf at its top", "inputSchema/properties/list is an array schema without items",
		"inputSchema/properties/t is true", "$ref #/$defs/node is recursive", "outputSchema/properties/errors is an array schema without items"} {
		if !strings.Contains(got, want) {
			t.Errorf("the check missed %q; it found:\n%s", want, got)
		}
	}
}
