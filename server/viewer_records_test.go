package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/store"
)

// TestRecordsForTheViewer: a run of the prompt path records its goal and
// the planner's tokens, a run of a plan its first step, and each step its
// kind and resolved arguments — what the viewer shows without reading a
// run's envelope.
func TestRecordsForTheViewer(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.jsonl")
	answer, _ := json.Marshal(map[string]any{"tool_calls": []any{map[string]any{"name": "__planning__", "arguments": json.RawMessage(echoPlan)}},
		"usage": map[string]any{"input_tokens": 321, "output_tokens": 12}})
	if err := os.WriteFile(script, append(answer, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderScripted, Script: script}}
	p := &probe{}
	app := newApp(t, cfg, p.tool(t, "echo"))
	cs := connectObs(t, app, nil)
	if _, res := artifact(t, cs, map[string]any{"prompt": "echo the greeting"}); res.IsError {
		t.Fatal("the prompt's run failed")
	}
	if _, res := artifact(t, cs, map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "hello", "tool": "echo", "arguments": map[string]any{"label": "${bindings.who}"}},
	}}, "bindings": map[string]any{"who": "world"}}); res.IsError {
		t.Fatal("the plan's run failed")
	}
	runs, _, err := app.Store().List(t.Context(), store.ListOptions{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("List = %v, %v; want two runs", runs, err)
	}
	planned, prompted := runs[0], runs[1]
	if prompted.Goal != "echo the greeting" || prompted.TokensIn != 321 || prompted.TokensOut != 12 {
		t.Errorf("the prompt's run: goal %q, tokens %d/%d; want its prompt and 321/12", prompted.Goal, prompted.TokensIn, prompted.TokensOut)
	}
	if planned.Goal != "" || planned.FirstStep != "hello (echo)" {
		t.Errorf("the plan's run: goal %q, first step %q; want none and hello (echo)", planned.Goal, planned.FirstStep)
	}
	step, err := app.Store().StepIn(t.Context(), store.Scope{}, planned.ExecID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if step.Kind != "tool" || string(step.Arguments) != `{"label":"world"}` {
		t.Errorf("the step's kind %q, arguments %s; want tool and the resolved {\"label\":\"world\"}", step.Kind, step.Arguments)
	}
}
