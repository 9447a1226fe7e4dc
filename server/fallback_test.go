package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// fallbackConfig is a configuration whose scripted planner, with
// planner.fallback: reactive, answers twice with a plan that calls an
// unknown tool, then, in the reactive loop, renders a hello to each of
// whom, then answers answer. The script is written to dir.
func fallbackConfig(t *testing.T, dir string, whom []string, answer string) *config.Config {
	t.Helper()
	line := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	bad := line(map[string]any{"tool_calls": []any{map[string]any{"name": "__planning__",
		"arguments": json.RawMessage(`{"type":"tool_calls","reasoning":"x","calls":[{"tool_name":"no_such_tool","arguments":{}}]}`)}}})
	lines := []string{bad, bad}
	for _, who := range whom {
		lines = append(lines, line(map[string]any{"tool_calls": []any{map[string]any{"name": "render",
			"arguments": map[string]any{"template": "hello {{.who}}", "values": map[string]any{"who": who}}}}}))
	}
	lines = append(lines, line(map[string]any{"text": answer}))
	script := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(script, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("planner:\n  provider: scripted\n  script: "+script+"\n  fallback: reactive\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestConfiguredFallbackFromTheConfigFile: planner.fallback: reactive in the
// configuration file turns a prompt the model cannot make a valid plan for
// into a reactive run, without the request asking for it; the envelope
// records the path that ran.
func TestConfiguredFallbackFromTheConfigFile(t *testing.T) {
	cfg := fallbackConfig(t, t.TempDir(), []string{"world"}, "It says hello world.")
	app := newApp(t, cfg)
	p, err := app.Planner()
	if err != nil {
		t.Fatal(err)
	}
	env, err := p.Ask(t.Context(), &orchestrate.Request{Prompt: "say hello to the world"})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if !a.Success || a.Planner.Fallback != planner.FallbackReactive || a.Response != "It says hello world." || len(a.Steps) != 1 {
		t.Errorf("status %s, planner %+v, response %q, %d steps, errors %v", a.Status, a.Planner, a.Response, len(a.Steps), a.Errors)
	}
	if _, err := config.Parse([]byte("planner:\n  provider: scripted\n  script: x\n  fallback: reactiv\n"), os.LookupEnv); err == nil || !strings.Contains(err.Error(), "planner.fallback") {
		t.Errorf("a misspelled fallback: %v", err)
	}
}

// TestReactiveFallbackRecord: a prompt that falls back to the reactive
// tool loop is one run: its record ends as its envelope does (success),
// with the loop's tool calls as its steps and its step count, and the
// calls are no runs of their own.
func TestReactiveFallbackRecord(t *testing.T) {
	dir := t.TempDir()
	cfg := fallbackConfig(t, dir, []string{"world", "moon"}, "It says hello to both.")
	cs := connectObs(t, appWithStore(t, filepath.Join(dir, "o.db"), cfg), nil)
	_, env := servertest.Call(t, cs, map[string]any{"prompt": "say hello to the world and the moon"}, nil)
	if env.Artifact.Status != orchestrate.StatusSuccess || len(env.Artifact.Steps) != 2 {
		t.Fatalf("the fallback's envelope: status %s, %d steps", env.Artifact.Status, len(env.Artifact.Steps))
	}
	rec := readExecution(t, cs, env.ArtifactID)
	if rec.Status != env.Artifact.Status {
		t.Errorf("the record says %s, the envelope %s", rec.Status, env.Artifact.Status)
	}
	var stored orchestrate.Envelope
	if err := json.Unmarshal(rec.Envelope, &stored); err != nil || stored.Artifact == nil || stored.Artifact.Status != orchestrate.StatusSuccess || len(stored.Artifact.Steps) != 2 {
		t.Errorf("the record's envelope is not the fallback's: %s", rec.Envelope)
	}
	var calls []string
	for _, s := range rec.Records {
		calls = append(calls, s.Tool+":"+s.Status)
	}
	if strings.Join(calls, ",") != "render:success,render:success" || rec.Steps != 2 {
		t.Errorf("the record's steps: %v (count %d); want the two render calls", calls, rec.Steps)
	}
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.ExecutionsURI})
	if err != nil {
		t.Fatal(err)
	}
	var page server.ExecutionPage
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Executions) != 1 {
		t.Errorf("the records list %d runs, want the one: %+v", len(page.Executions), page.Executions)
	}
}

// TestReactiveFallbackHandsOff: the reactive fallback's model asks, in one
// turn, for render (run here) and the client tool editor_apply: the run
// pauses with the client's call, named by the fallback's step; the resume
// brings its result, the model's next request carries both results as
// tool messages, and the run ends with the model's answer. No model turn
// and no call runs twice.
func TestReactiveFallbackHandsOff(t *testing.T) {
	var planning atomic.Int64
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if !strings.Contains(r.System(), "No plan could be made") {
			planning.Add(1)
			return fakeopenai.Text("no plan here")
		}
		if len(r.ToolResults()) == 0 {
			render := fakeopenai.Call("render", `{"template": "hello {{.who}}", "values": {"who": "world"}}`)
			apply := fakeopenai.Call("editor_apply", `{"path": "a.txt", "text": "hello world"}`)
			return fakeopenai.Reply{ToolCalls: append(render.ToolCalls, apply.ToolCalls...)}
		}
		return fakeopenai.Text("done: " + strings.Join(r.ToolResults(), " | "))
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), nil, func(cfg *config.Config) { cfg.Planner.Fallback = planner.FallbackReactive })
	_, env := runPlan(t, cs, map[string]any{"prompt": "greet the world in a.txt", "client_tools": []any{editorApply}})
	a := env.Artifact
	if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 1 || a.Resume == nil || a.Planner == nil || a.Planner.Fallback != planner.FallbackReactive {
		t.Fatalf("status %s, pending %+v, planner %+v, errors %v", a.Status, a.Pending, a.Planner, a.Errors)
	}
	p := a.Pending[0]
	if p.Step != orchestrate.FallbackStep || p.Tool != "editor_apply" || p.Arguments["text"] != "hello world" || p.CallID == "" {
		t.Errorf("pending call %+v", p)
	}
	if len(a.Steps) != 1 || a.Steps[0].Tool != "render" || a.Steps[0].Status != orchestrate.StatusSuccess {
		t.Errorf("the steps before the pause: %+v", a.Steps)
	}
	asked := len(fake.Requests())
	p0 := env.Metadata
	_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": a.Resume.ExecID, "results": map[string]any{p.CallID: map[string]any{"applied": true}}}})
	a = env.Artifact
	if a.Status != orchestrate.StatusSuccess || env.Metadata.ExecID != p0.ExecID {
		t.Fatalf("after the resume: status %s, errors %v, validation %v", a.Status, a.Errors, a.ValidationErrors)
	}
	reqs := fake.Requests()
	if len(reqs) != asked+1 || int(planning.Load()) != asked-1 {
		t.Fatalf("the model was asked %d times after the resume (%d planning in all); want the one turn", len(reqs)-asked, planning.Load())
	}
	results := reqs[len(reqs)-1].ToolResults()
	if len(results) != 2 || !strings.Contains(results[0], "hello world") || results[1] != `{"applied":true}` {
		t.Errorf("the tool messages of the model's turn after the resume: %q", results)
	}
	if !strings.HasPrefix(a.Response, "done: ") || a.Planner == nil || a.Planner.Fallback != planner.FallbackReactive {
		t.Errorf("the answer %q, planner %+v", a.Response, a.Planner)
	}
	for _, s := range a.Steps {
		if s.Tool == "render" {
			t.Errorf("render ran again after the resume: %+v", s)
		}
	}
}

// TestReactiveFallbackResumeSeesOwnWorkflows: the caller's own saved
// workflow is offered to the reactive fallback's model with its own
// description, before the fallback hands off to the client and after the
// resume alike, not as the catalog's neutral stand-in.
func TestReactiveFallbackResumeSeesOwnWorkflows(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		switch {
		case !strings.Contains(r.System(), "No plan could be made"):
			return fakeopenai.Text("no plan here")
		case len(r.ToolResults()) == 0:
			return fakeopenai.Call("editor_apply", `{"path": "a.txt", "text": "hello"}`)
		}
		return fakeopenai.Text("done")
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), nil, func(cfg *config.Config) { cfg.Planner.Fallback = planner.FallbackReactive })
	_, env := runPlan(t, cs, map[string]any{
		"plan":    map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "hi {{.who}}", "values": map[string]any{"who": "ana"}}}}},
		"save_as": map[string]any{"name": "greet", "description": "Greets someone by name."},
	})
	if !env.Artifact.Success {
		t.Fatalf("saving the workflow: %+v", env.Artifact)
	}
	offered := func(r *fakeopenai.Request) string {
		for _, tool := range r.Tools {
			if tool.Function.Name == "workflow__greet" {
				return tool.Function.Description
			}
		}
		return "(not offered)"
	}
	_, env = runPlan(t, cs, map[string]any{"prompt": "greet in a.txt", "client_tools": []any{editorApply}})
	a := env.Artifact
	if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 1 {
		t.Fatalf("status %s, pending %+v, errors %v", a.Status, a.Pending, a.Errors)
	}
	reqs := fake.Requests()
	if d := offered(reqs[len(reqs)-1]); !strings.Contains(d, "Greets someone by name.") {
		t.Errorf("before the handoff the fallback's model was offered workflow__greet as %q", d)
	}
	_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": a.Resume.ExecID, "results": map[string]any{a.Pending[0].CallID: map[string]any{"applied": true}}}})
	if env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("after the resume: %s %v", env.Artifact.Status, env.Artifact.Errors)
	}
	reqs = fake.Requests()
	if d := offered(reqs[len(reqs)-1]); !strings.Contains(d, "Greets someone by name.") {
		t.Errorf("after the resume the fallback's model was offered workflow__greet as %q", d)
	}
}
