package agents_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// setup builds the agents of cfgs over the built-in tools, with model m,
// and an engine whose hooks record the runs' starts and ends.
func setup(t *testing.T, m llm.Model, cfgs map[string]agents.Config) (*registry.Catalog, *orchestrate.Engine, *runs) {
	t.Helper()
	var workers builtin.Workers
	t.Cleanup(func() { workers.Close() })
	cat := registry.NewCatalog(builtin.Tools(builtin.DefaultConfig(), builtin.Options{Workers: &workers})...)
	rs := &runs{parents: map[string]string{}}
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat, Hooks: &orchestrate.Hooks{
		RunStarted: func(i orchestrate.RunStartedInfo) { rs.started(i.Run) },
		RunFinished: func(i orchestrate.RunFinishedInfo) {
			if i.Err != nil {
				t.Errorf("engine error in run %s: %v", i.Run.ExecID, i.Err)
			}
		},
	}})
	tools, err := agents.Tools(cfgs, agents.Options{Engine: e, Catalog: cat, Model: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Add(tools...); err != nil {
		t.Fatal(err)
	}
	return cat, e, rs
}

type runs struct {
	mu      sync.Mutex
	parents map[string]string // exec id -> parent exec id
}

func (r *runs) started(info *orchestrate.RunInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parents[info.ExecID] = info.ParentExecID
}

func call(t *testing.T, cat *registry.Catalog, name string, args map[string]any, progress func(registry.Progress)) (*registry.Result, agents.ExecutionResponse) {
	t.Helper()
	tool, ok := cat.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	res, err := tool.Invoke(t.Context(), &registry.CallRequest{Arguments: args, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.Structured)
	var out agents.ExecutionResponse
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return res, out
}

func toolCall(name, args string) llm.Response {
	return llm.Response{ToolCalls: []llm.ToolCall{{ID: "1", Name: name, Arguments: json.RawMessage(args)}}}
}

// An action's prompt is its template over with, after the parameters were
// checked against its input schema; progress reports each tool call.
func TestActionPromptAndProgress(t *testing.T) {
	m := llm.NewScripted([]llm.Response{toolCall("render", `{"template": "hi"}`), {Text: "Headline: fruit"}})
	cat, _, _ := setup(t, m, map[string]agents.Config{"writer": {
		Description: "Writes.", Instructions: "You write.", Tools: []string{"render"},
		Actions: map[string]agents.Action{"headline": {Description: "A headline.", Prompt: "Write a headline about {{.topic}}.",
			InputSchema: map[string]any{"type": "object", "required": []any{"topic"}}}},
	}})
	var reports []string
	res, out := call(t, cat, "agent__writer", map[string]any{"action": "headline", "with": map[string]any{"topic": "fruit"}, "request_id": "r1"},
		func(p registry.Progress) { reports = append(reports, p.Message) })
	if res.IsError || out.Status != agents.StatusSuccess || out.Result.Text != "Headline: fruit" || out.RequestID != "r1" {
		t.Fatalf("response %+v", out)
	}
	if got := m.Requests()[0].Messages[0].Content; !strings.HasPrefix(got, "Write a headline about fruit.") {
		t.Errorf("the user message = %q", got)
	}
	if m.Requests()[0].System != "You write." {
		t.Errorf("system = %q", m.Requests()[0].System)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "calling render") {
		t.Errorf("progress = %v", reports)
	}

	// Parameters that miss the action's schema are refused before any model call.
	before := len(m.Requests())
	res, out = call(t, cat, "agent__writer", map[string]any{"action": "headline", "with": map[string]any{}}, nil)
	if !res.IsError || res.Code != string(orchestrate.CodeInvalidInput) || !strings.Contains(out.Error.Message, "topic") || len(m.Requests()) != before {
		t.Errorf("missing parameter: code %q, response %+v", res.Code, out.Error)
	}
}

// An answer that does not match the output_schema is repaired once; a
// second bad answer is invalid_output.
func TestOutputRepair(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}
	m := llm.NewScripted([]llm.Response{{Text: "three"}, {Text: "```json\n{\"n\": 3}\n```"}, {Text: `{"n": "x"}`}, {Text: `{}`}})
	cat, _, _ := setup(t, m, map[string]agents.Config{"counter": {Description: "Counts.", OutputSchema: schema}})
	res, out := call(t, cat, "agent__counter", map[string]any{"user_query": "count"}, nil)
	if res.IsError || out.Result.Data.(map[string]any)["n"] != float64(3) || out.Metadata.ModelCalls != 2 {
		t.Fatalf("repaired: %+v", out)
	}
	if r := m.Requests()[1]; !strings.Contains(r.Messages[len(r.Messages)-1].Content, "not valid") || r.ResponseSchema == nil {
		t.Errorf("the repair request = %+v", r)
	}
	res, out = call(t, cat, "agent__counter", map[string]any{"prompt": "count"}, nil)
	if !res.IsError || res.Code != string(orchestrate.CodeInvalidOutput) || out.Error.Code != orchestrate.CodeInvalidOutput {
		t.Errorf("after a failed repair: code %q, %+v", res.Code, out.Error)
	}
}

// A model that fails gives status error with model_error; an agent
// without a model says how to configure one; a model that panics does
// not escape.
func TestFailures(t *testing.T) {
	m := llm.NewScripted(nil) // no answers: every call fails
	cat, _, _ := setup(t, m, map[string]agents.Config{"a": {Description: "A."}})
	res, out := call(t, cat, "agent__a", map[string]any{"user_query": "go"}, nil)
	if !res.IsError || out.Error.Code != orchestrate.CodeModelError {
		t.Errorf("a failing model: %+v", out.Error)
	}
	cat, _, _ = setup(t, nil, map[string]agents.Config{"a": {Description: "A."}})
	_, out = call(t, cat, "agent__a", map[string]any{"user_query": "go"}, nil)
	if out.Error == nil || !strings.Contains(out.Error.Message, "agents.a.model") {
		t.Errorf("no model: %+v", out.Error)
	}
	cat, _, _ = setup(t, panicky{}, map[string]agents.Config{"a": {Description: "A."}})
	res, out = call(t, cat, "agent__a", map[string]any{"user_query": "go"}, nil)
	if !res.IsError || out.Error.Code != orchestrate.CodePanic {
		t.Errorf("a panicking model: %+v", out.Error)
	}
}

type panicky struct{}

func (panicky) Generate(context.Context, *llm.Request) (*llm.Response, error) { panic("boom") }
func (panicky) Name() string                                                  { return "panicky" }

// An agent step's run is a child of the plan's run.
func TestChildOfThePlan(t *testing.T) {
	m := llm.NewScripted([]llm.Response{{Text: "ok"}})
	cat, e, rs := setup(t, m, map[string]agents.Config{"a": {Description: "A."}})
	_ = cat
	plan, issues := orchestrate.DecodePlan([]byte(`{"steps": [{"id": "s", "agent": "a", "prompt": "go"}]}`))
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	env := e.Run(t.Context(), &orchestrate.Request{Plan: plan})
	if env.Artifact.Status != orchestrate.StatusSuccess || env.Artifact.Steps[0].Type != "agent" {
		t.Fatalf("status %s, steps %+v", env.Artifact.Status, env.Artifact.Steps)
	}
	data, _ := json.Marshal(env.Artifact.Steps[0].Output)
	var out agents.ExecutionResponse
	json.Unmarshal(data, &out)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.parents[out.Metadata.ExecID] != env.Metadata.ExecID {
		t.Errorf("the agent run's parent is %q; want the plan's run %q", rs.parents[out.Metadata.ExecID], env.Metadata.ExecID)
	}
}

// Configuration problems are reported by name.
func TestValidate(t *testing.T) {
	got := strings.Join(agents.Config{Tools: []string{"["}, MaxToolSteps: -1,
		OutputSchema: map[string]any{"type": 3}}.Validate("bad name"), "\n")
	for _, want := range []string{"agents.bad name: an agent's name", "agents.bad name.description is required", "max_tool_steps must not be negative", `"[" is not a valid glob`, "output_schema"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
}

// TestHostileOutputSchemas: an agent's output_schema that refers to itself
// overflowed the stack of orchestra serve and orchestra validate; each is
// a configuration problem that names the agent and says why.
func TestHostileOutputSchemas(t *testing.T) {
	for name, schema := range map[string]string{
		"ref self":    `{"$ref": "#"}`,
		"defs cycle":  `{"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"v": {"$ref": "#/$defs/a"}}}`,
		"allOf self":  `{"type": "object", "allOf": [{"$ref": "#"}]}`,
		"typed ref #": `{"type": "object", "$ref": "#"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var s map[string]any
			if err := json.Unmarshal([]byte(schema), &s); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(agents.Config{Description: "d", OutputSchema: s}.Validate("probe"), "\n")
			if !strings.Contains(got, "probe") || !strings.Contains(got, "output_schema") || !strings.Contains(got, "refers to itself") {
				t.Errorf("problems = %q, want the agent's output_schema refused as referring to itself", got)
			}
		})
	}
}
