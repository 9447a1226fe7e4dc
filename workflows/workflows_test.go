package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/workflows"
)

func schema(t *testing.T, s string) *jsonschema.Schema {
	t.Helper()
	var out jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// fetchTool takes a url (a string with a format) and a count; its output
// is {title, words}.
func fetchTool(t *testing.T) registry.Tool {
	return registry.Tool{
		Name:         "fetch",
		InputSchema:  schema(t, `{"type":"object","properties":{"url":{"type":"string","format":"uri"},"count":{"type":"integer","minimum":1}},"required":["url"]}`),
		OutputSchema: schema(t, `{"type":"object","properties":{"title":{"type":"string"},"words":{"type":"array","items":{"type":"string"}}},"required":["title"]}`),
		Call: func(ctx context.Context, cr *registry.CallRequest) (*registry.Result, error) {
			return &registry.Result{Structured: map[string]any{"title": "T " + cr.Arguments["url"].(string), "words": []any{"a"}}}, nil
		},
	}
}

func decode(t *testing.T, s string) *orchestrate.Plan {
	t.Helper()
	p, issues := orchestrate.DecodePlan([]byte(s))
	if len(issues) > 0 {
		t.Fatal(issues[0].Message)
	}
	return p
}

// TestInferParameters: a binding the plan reads becomes a parameter with
// the schema of the argument it feeds; literal arguments become parameters
// too (shared when two steps pass the same value, named by step when they
// differ), each with its run's value as default; arguments inside a loop's
// body stay as they are.
func TestInferParameters(t *testing.T) {
	cat := registry.NewCatalog(fetchTool(t))
	p := decode(t, `{"steps":[
		{"id":"a","tool":"fetch","arguments":{"url":"$bindings.site","count":3}},
		{"id":"b","tool":"fetch","arguments":{"url":"https://b.example","count":3}},
		{"id":"c","tool":"fetch","arguments":{"url":"https://c.example"}},
		{"id":"l","for_each":["x"],"do":{"id":"d","tool":"fetch","arguments":{"url":"https://loop.example"}}}],
		"return":{"title":"$a.output.title","words":"$b.output.words"}}`)
	w, err := workflows.Infer("pages", "", p, map[string]any{"site": "https://a.example"}, cat)
	if err != nil {
		t.Fatal(err)
	}
	props := w.Parameters.Properties
	got := map[string]string{}
	for name, s := range props {
		got[name] = s.Type + " " + string(s.Default) + " " + s.Format
	}
	want := map[string]string{
		"site":  `string "https://a.example" uri`,
		"count": `integer 3 `,
		"url":   `string "https://b.example" uri`,
		"c_url": `string "https://c.example" uri`,
	}
	if len(got) != len(want) {
		t.Errorf("parameters = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parameter %s = %q; want %q", k, got[k], v)
		}
	}
	if !strings.Contains(props["count"].Description, "count of fetch (step a)") || !strings.Contains(props["count"].Description, "(step b)") {
		t.Errorf("count's description = %q", props["count"].Description)
	}
	if !strings.Contains(string(w.Plan), `"url":"https://loop.example"`) || !strings.Contains(string(w.Plan), `"url":"$bindings.c_url"`) {
		t.Errorf("plan = %s", w.Plan)
	}
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
	if err := w.Check(e); err != nil {
		t.Fatalf("the inferred workflow does not check: %v", err)
	}
	out, _ := json.Marshal(w.OutputSchema(cat))
	if string(out) != `{"type":"object","properties":{"title":{"type":"string"},"words":{"type":"array","items":{"type":"string"}}},"required":["title","words"]}` {
		t.Errorf("outputSchema = %s", out)
	}
	// Called with a new site and the defaults for the rest.
	tool := workflows.Tool(w, workflows.ToolOptions{Engine: e, Resolve: func(context.Context, string) (*workflows.Workflow, error) { return w, nil }})
	res, err := tool.Call(t.Context(), &registry.CallRequest{Arguments: map[string]any{"site": "https://new.example"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if data, _ := json.Marshal(res.Structured); string(data) != `{"title":"T https://new.example","words":["a"]}` {
		t.Errorf("structured = %s", data)
	}
	res, _ = tool.Call(t.Context(), &registry.CallRequest{Arguments: map[string]any{"count": 0}})
	if msg := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(msg, "count") || !strings.Contains(msg, "minimum") {
		t.Errorf("count 0 against minimum 1: isError %v, %q", res.IsError, msg)
	}
}

// TestInferNamesAreBindingNames: a parameter is named so that the plan
// can read it, when the step ids are numbers (as planners write them) or
// an argument's name has bytes a binding name cannot hold; and a name
// taken by another value is not reused. The workflow checks and runs with
// new values.
func TestInferNamesAreBindingNames(t *testing.T) {
	search := registry.Tool{
		Name:        "search",
		InputSchema: schema(t, `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"number"},"page size":{"type":"integer"}}}`),
		Call: func(ctx context.Context, cr *registry.CallRequest) (*registry.Result, error) {
			return &registry.Result{Structured: map[string]any{"args": cr.Arguments}}, nil
		},
	}
	cat := registry.NewCatalog(search)
	p := decode(t, `{"steps":[
		{"tool":"search","arguments":{"q":"a","limit":100,"page size":5}},
		{"tool":"search","arguments":{"q":"a","limit":20}},
		{"id":"_1","tool":"search","arguments":{"limit":7}},
		{"tool":"search","arguments":{"limit":3}}],
		"return":{"first":"$0.output.args","last":"$3.output.args"}}`)
	w, err := workflows.Infer("search-twice", "", p, nil, cat)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for name, s := range w.Parameters.Properties {
		got[name] = string(s.Default)
	}
	want := map[string]string{"q": `"a"`, "limit": "100", "page_size": "5", "_1_limit": "20", "_1_limit_2": "7", "_3_limit": "3"}
	if len(got) != len(want) {
		t.Errorf("parameters = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parameter %s = %s; want %s (all: %v)", k, got[k], v, got)
		}
	}
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
	if err := w.Check(e); err != nil {
		t.Fatalf("the inferred workflow does not check: %v", err)
	}
	tool := workflows.Tool(w, workflows.ToolOptions{Engine: e, Resolve: func(context.Context, string) (*workflows.Workflow, error) { return w, nil }})
	res, err := tool.Call(t.Context(), &registry.CallRequest{Arguments: map[string]any{"_3_limit": 30, "page_size": 9}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if data, _ := json.Marshal(res.Structured); string(data) != `{"first":{"limit":100,"page size":9,"q":"a"},"last":{"limit":30}}` {
		t.Errorf("structured = %s", data)
	}
}

// TestCheckNamesStepAndField: a workflow whose tool changed shape fails
// its check with the workflow, version, step and field.
func TestCheckNamesStepAndField(t *testing.T) {
	w, err := workflows.FromConfig("pages", workflows.Config{
		Version:    2,
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"site": map[string]any{"type": "string"}}},
		Plan:       map[string]any{"steps": []any{map[string]any{"id": "get", "tool": "fetch", "arguments": map[string]any{"link": "$bindings.site"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(fetchTool(t))})
	err = w.Check(e)
	var ce *workflows.CheckError
	if !errors.As(err, &ce) || ce.Workflow != "pages" || ce.Version != 2 {
		t.Fatalf("check = %v", err)
	}
	for _, want := range []string{`workflow "pages" version 2`, `step "get"`, "plan.steps[0].arguments"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
	// A parameter the plan reads with a path its schema lacks.
	w2, _ := workflows.FromConfig("pages", workflows.Config{
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"cfg": map[string]any{"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string"}}, "additionalProperties": false}}},
		Plan:       map[string]any{"steps": []any{map[string]any{"id": "get", "tool": "fetch", "arguments": map[string]any{"url": "$bindings.cfg.uri"}}}},
	})
	if err := w2.Check(e); err == nil || !strings.Contains(err.Error(), `parameter "cfg"`) {
		t.Errorf("a path the parameter's schema lacks: %v", err)
	}
}

// TestConfigProblems: a configured workflow with a bad name, no plan, a
// plan that does not decode or parameters that are no object schema is
// refused with where the problem is.
func TestConfigProblems(t *testing.T) {
	for name, c := range map[string]workflows.Config{
		"bad name":  {Plan: map[string]any{"steps": []any{}}},
		"no_plan":   {},
		"bad_plan":  {Plan: map[string]any{"steps": "x"}},
		"bad_param": {Plan: map[string]any{"steps": []any{map[string]any{"tool": "fetch"}}}, Parameters: map[string]any{"type": "string"}},
	} {
		if p := c.Validate(name); len(p) != 1 || !strings.Contains(p[0], "workflows."+name) {
			t.Errorf("%s: %v", name, p)
		}
	}
}
