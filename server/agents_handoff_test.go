package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// editorApply is the client tool of the handoff tests: the client applies
// an edit in its editor.
var editorApply = map[string]any{
	"name": "editor_apply", "description": "Applies an edit in the user's editor.",
	"input_schema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"path": map[string]any{"type": "string"}, "text": map[string]any{"type": "string"}},
		"required":   []any{"path", "text"},
	},
}

// handoffModel is the coder agent's model: its first turn reads a.txt with
// the filesystem server and, in the same turn, asks the client to apply
// an edit (and once with malformed arguments, which is refused without
// pausing); the next turn answers with what the client said.
func handoffModel(t *testing.T, dir string) *fakeopenai.Server {
	return fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			read := fakeopenai.Call("fs__read_text_file", `{"path": "`+filepath.Join(dir, "a.txt")+`"}`)
			apply := fakeopenai.Call("editor_apply", `{"path": "a.txt", "text": "ALPHA"}`)
			bad := fakeopenai.Call("editor_apply", `{"text": "no path"}`)
			return fakeopenai.Reply{ToolCalls: append(append(read.ToolCalls, apply.ToolCalls...), bad.ToolCalls...)}
		}
		return fakeopenai.Text("edited; the client said " + strings.Join(r.ToolResults(), " | "))
	})
}

// TestAgentHandsOffToClient: an agent step's model reads a file with the
// real filesystem server and asks for the client tool editor_apply in the
// same turn. The read runs, a malformed editor_apply is refused to the
// model, and the run pauses with the well-formed call, named by its agent
// step and agent. The resume brings the client's result: the model's next
// request carries it as a tool message (with the read's result, run
// once), the agent answers, and the plan's next step uses the answer. The
// fake saw each turn once.
func TestAgentHandsOffToClient(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.txt": "alpha"})
	fake := handoffModel(t, dir)
	_, cs := agentsApp(t, fake.URL(), dir, map[string]agents.Config{
		"coder": {Description: "Edits files.", Instructions: "You are coder.", Tools: []string{"fs__read_text_file", "editor_*"}},
	}, nil)

	args := plan(
		map[string]any{"id": "edit", "agent": "coder", "prompt": "Uppercase a.txt"},
		map[string]any{"id": "report", "tool": "render", "arguments": map[string]any{"template": "report: {{.a}}", "values": map[string]any{"a": "$edit.output.result.text"}}},
	)
	args["client_tools"] = []any{editorApply}
	_, env := runPlan(t, cs, args)
	a := env.Artifact
	if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 1 || a.Resume == nil {
		t.Fatalf("status %s, pending %+v, errors %v", a.Status, a.Pending, a.Errors)
	}
	p := a.Pending[0]
	if p.Step != "edit" || p.Agent != agents.ToolName("coder") || p.Tool != "editor_apply" || p.Arguments["path"] != "a.txt" || p.Arguments["text"] != "ALPHA" || p.CallID == "" {
		t.Errorf("pending call %+v", p)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times before the pause; want 1", n)
	}
	if a.Steps[0].Status != orchestrate.StatusAwaitingClient || a.Steps[1].Status == orchestrate.StatusSuccess {
		t.Errorf("steps: edit %s, report %s", a.Steps[0].Status, a.Steps[1].Status)
	}

	_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": a.Resume.ExecID, "results": map[string]any{p.CallID: map[string]any{"applied": true}}}})
	a = env.Artifact
	if a.Status != orchestrate.StatusSuccess {
		t.Fatalf("after the resume: status %s, errors %v, validation %v", a.Status, a.Errors, a.ValidationErrors)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times in all; want 2 (each turn once)", len(reqs))
	}
	results := reqs[1].ToolResults()
	if len(results) != 3 || !strings.Contains(results[0], "alpha") || results[1] != `{"applied":true}` || !strings.Contains(results[2], "not sent to the client") {
		t.Errorf("the tool messages of the model's second turn: %q", results)
	}
	out := agentOutput(t, a.Steps[0])
	if out.Status != agents.StatusSuccess || !strings.HasPrefix(out.Result.Text, "edited; the client said") || out.Metadata.ModelCalls != 2 {
		t.Errorf("the agent's answer: %+v", out)
	}
	if got, _ := a.Steps[1].Output.(map[string]any)["text"].(string); !strings.HasPrefix(got, "report: edited;") {
		t.Errorf("the next step's output: %q", got)
	}
	// The agent's child run went on after the pause: one read, its model
	// turns and the client's call, each recorded once.
	rec := readExecution(t, cs, out.Metadata.ExecID)
	var steps []string
	for _, s := range rec.Records {
		steps = append(steps, s.StepID+" "+s.Tool+" "+s.Status)
	}
	want := []string{"model_0 openai:fake-model success", "call_0 fs__read_text_file success", "refused_2 editor_apply failed", "client_3 editor_apply success", "model_4 openai:fake-model success"}
	if !slices.Equal(steps, want) || rec.Status != "success" {
		t.Errorf("the agent's record: %s, steps %v; want %v", rec.Status, steps, want)
	}
	data, _ := json.Marshal(rec)
	if strings.Count(string(data), `"fs__read_text_file"`) < 1 {
		t.Errorf("record %s", data)
	}
}

// TestAgentDirectHandoff: an exposed agent called directly asks for
// ask_user, and the client has no elicitation: the call answers
// awaiting_client with the pending call and the exec id to resume, its
// structuredContent valid against the tool's outputSchema. The resume
// (agent_orchestrate's) goes on with the user's answer: the model's next
// turn reads it, and the agent answers.
func TestAgentDirectHandoff(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("ask_user", `{"message": "Which file?"}`)
		}
		return fakeopenai.Text("the user chose " + r.ToolResults()[0])
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"asker": {Description: "Asks.", Instructions: "You are asker.", Tools: []string{"ask_user"}, Expose: true},
	}, nil)
	var schema *jsonschema.Schema
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == agents.ToolName("asker") {
			data, _ := json.Marshal(tool.OutputSchema)
			schema = &jsonschema.Schema{}
			if err := json.Unmarshal(data, schema); err != nil {
				t.Fatal(err)
			}
		}
	}
	if schema == nil {
		t.Fatal("agent__asker is not listed")
	}
	rs, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: agents.ToolName("asker"), Arguments: map[string]any{"user_query": "pick a file", "request_id": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var sc any
	_ = json.Unmarshal(data, &sc)
	if err := rs.Validate(sc); err != nil {
		t.Errorf("the structuredContent does not match the outputSchema: %v\n%s", err, data)
	}
	var out agents.ExecutionResponse
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if res.IsError || out.Status != agents.StatusAwaitingClient || len(out.Pending) != 1 || out.Resume == nil || out.Resume.ExecID != out.Metadata.ExecID || out.RequestID != "r1" {
		t.Fatalf("the direct call's answer: %s", data)
	}
	p := out.Pending[0]
	if p.Tool != "ask_user" || p.Agent != agents.ToolName("asker") || p.Arguments["message"] != "Which file?" {
		t.Errorf("pending %+v", p)
	}
	answer := map[string]any{"action": "accept", "content": map[string]any{"file": "a.txt"}}
	_, env := runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": out.Resume.ExecID, "results": map[string]any{p.CallID: answer}}})
	a := env.Artifact
	if a.Status != orchestrate.StatusSuccess || len(a.Steps) != 1 || env.Metadata.ExecID != out.Resume.ExecID {
		t.Fatalf("the resume: status %s, steps %d, errors %v, validation %v", a.Status, len(a.Steps), a.Errors, a.ValidationErrors)
	}
	final := agentOutput(t, a.Steps[0])
	if final.Status != agents.StatusSuccess || !strings.Contains(final.Result.Text, `the user chose {"action":"accept","content":{"file":"a.txt"}}`) || final.Metadata.ModelCalls != 2 {
		t.Errorf("the agent's answer after the resume: %+v", final)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("the model was asked %d times; want 2", n)
	}
}

// TestParallelAgentsHandOffTogether: two agent steps of a parallel group
// both ask for editor_apply: the run pauses once with both calls, the step
// after the group waits, and one resume with both results lets both loops
// go on: a resume with only one of them lets that one go on, and the
// other waits again with the same call, its loop not run again.
func TestParallelAgentsHandOffTogether(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		who := "left"
		if strings.Contains(r.System(), "right") {
			who = "right"
		}
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("editor_apply", `{"path": "`+who+`.txt", "text": "x"}`)
		}
		return fakeopenai.Text(who + " got " + r.ToolResults()[0])
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"left":  {Description: "Left.", Instructions: "You are left.", Tools: []string{"editor_apply"}},
		"right": {Description: "Right.", Instructions: "You are right.", Tools: []string{"editor_apply"}},
	}, func(c *config.Config) { c.ClientFinalTools = []string{"editor_*"} }) // the client's tools the agents may call
	args := plan(
		map[string]any{"id": "both", "parallel": []any{
			map[string]any{"id": "l", "agent": "left", "prompt": "edit"},
			map[string]any{"id": "r", "agent": "right", "prompt": "edit"},
		}},
		map[string]any{"id": "join", "tool": "render", "arguments": map[string]any{"template": "{{.l}} / {{.r}}", "values": map[string]any{"l": "$l.output.result.text", "r": "$r.output.result.text"}}},
	)
	args["client_tools"] = []any{editorApply}
	_, env := runPlan(t, cs, args)
	a := env.Artifact
	if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 2 {
		t.Fatalf("status %s, pending %+v, errors %v", a.Status, a.Pending, a.Errors)
	}
	if a.Steps[1].Status == orchestrate.StatusSuccess {
		t.Errorf("the step after the group ran before the client's results: %s", a.Steps[1].Status)
	}
	ids := map[string]string{}
	for _, p := range a.Pending {
		ids[p.Step] = p.CallID
	}
	if ids["l"] == "" || ids["r"] == "" {
		t.Fatalf("pending %+v; want one call of l and one of r", a.Pending)
	}
	id := a.Resume.ExecID
	_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": id, "results": map[string]any{ids["l"]: map[string]any{"applied": true}}}})
	a = env.Artifact
	if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 1 || a.Pending[0].CallID != ids["r"] || a.Pending[0].Step != "r" {
		t.Fatalf("after l's result: status %s, pending %+v, errors %v, validation %v", a.Status, a.Pending, a.Errors, a.ValidationErrors)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("the model was asked %d times after l's result; want 3 (r's loop waits, not run again)", n)
	}
	_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": id, "results": map[string]any{"r": map[string]any{"error": "the file is locked"}}}})
	a = env.Artifact
	if a.Status != orchestrate.StatusSuccess {
		t.Fatalf("after the resume: status %s, errors %v, validation %v", a.Status, a.Errors, a.ValidationErrors)
	}
	got, _ := a.Steps[1].Output.(map[string]any)["text"].(string)
	if got != `left got {"applied":true} / right got error: client_error: the file is locked` {
		t.Errorf("join = %q", got)
	}
	if n := len(fake.Requests()); n != 4 {
		t.Errorf("the model was asked %d times; want 4 (two turns of each agent)", n)
	}
}

// TestAgentHandoffBounds: a paused loop's state counts against
// limits.max_run_bytes (over it, the agent step fails too_large rather than
// pausing), and it expires with limits.pause_ttl: a late resume fails
// pause_expired and the loop's model is not asked again.
func TestAgentHandoffBounds(t *testing.T) {
	apply := func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("editor_apply", `{"path": "a.txt", "text": "`+strings.Repeat("x", 2000)+`"}`)
		}
		return fakeopenai.Text("done")
	}
	cfgs := map[string]agents.Config{"coder": {Description: "Edits.", Instructions: "You are coder.", Tools: []string{"editor_apply"}}}
	args := plan(map[string]any{"id": "edit", "agent": "coder", "prompt": "edit"})
	args["client_tools"] = []any{editorApply}

	t.Run("bytes", func(t *testing.T) {
		fake := fakeopenai.New(t, apply)
		_, cs := agentsApp(t, fake.URL(), t.TempDir(), cfgs, func(c *config.Config) { c.Limits.MaxRunBytes = 1500; c.ClientFinalTools = []string{"editor_*"} })
		_, env := runPlan(t, cs, args)
		a := env.Artifact
		if a.Status == orchestrate.StatusAwaitingClient || a.Steps[0].Error == nil || a.Steps[0].Error.Code != orchestrate.CodeTooLarge {
			t.Errorf("a loop state over max_run_bytes: status %s, step %+v", a.Status, a.Steps[0].Error)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		fake := fakeopenai.New(t, apply)
		_, cs := agentsApp(t, fake.URL(), t.TempDir(), cfgs, func(c *config.Config) { c.Limits.PauseTTL = time.Nanosecond; c.ClientFinalTools = []string{"editor_*"} })
		_, env := runPlan(t, cs, args)
		a := env.Artifact
		if a.Status != orchestrate.StatusAwaitingClient {
			t.Fatalf("status %s, errors %v", a.Status, a.Errors)
		}
		_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": a.Resume.ExecID, "results": map[string]any{"edit": map[string]any{"applied": true}}}})
		if a = env.Artifact; a.Status != orchestrate.StatusFailed || len(a.Errors) == 0 || a.Errors[len(a.Errors)-1].Code != orchestrate.CodePauseExpired {
			t.Errorf("a late resume: status %s, errors %v", a.Status, a.Errors)
		}
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("the model was asked %d times; want 1 (the expired loop does not go on)", n)
		}
	})
}

// TestAgentAskUserElicitsOrHandsOff: an agent's ask_user asks the user
// through MCP elicitation when the calling client has it, in a plan step
// and called directly alike: the model's next turn reads the answer and
// nothing pauses. A client without elicitation gets the call handed to it:
// the run pauses with ask_user pending.
func TestAgentAskUserElicitsOrHandsOff(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("ask_user", `{"message": "Which file?"}`)
		}
		return fakeopenai.Text("the user chose " + r.ToolResults()[0])
	})
	app, plain := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"asker": {Description: "Asks.", Instructions: "You are asker.", Tools: []string{"ask_user"}, Expose: true},
	}, nil)
	user := &elicitingClient{action: "accept"}
	eliciting := connectWith(t, app.Server, v20251125, user.options())
	step := plan(map[string]any{"id": "ask", "agent": "asker", "prompt": "pick a file"})
	const answered = `the user chose {"action":"accept","content":{"why":"obsolete"}}`

	t.Run("plan step, elicitation", func(t *testing.T) {
		_, env := runPlan(t, eliciting, step)
		a := env.Artifact
		if a.Status != orchestrate.StatusSuccess || len(a.Pending) != 0 {
			t.Fatalf("status %s, pending %+v, errors %v", a.Status, a.Pending, a.Errors)
		}
		if out := agentOutput(t, a.Steps[0]); out.Result.Text != answered {
			t.Errorf("the agent's answer: %q", out.Result.Text)
		}
	})
	t.Run("direct call, elicitation", func(t *testing.T) {
		res, err := eliciting.CallTool(t.Context(), &mcp.CallToolParams{Name: agents.ToolName("asker"), Arguments: map[string]any{"user_query": "pick a file"}})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res.StructuredContent)
		var out agents.ExecutionResponse
		if err := json.Unmarshal(data, &out); err != nil || res.IsError || out.Status != agents.StatusSuccess || out.Result.Text != answered {
			t.Errorf("the direct call's answer: %s (%v)", data, err)
		}
	})
	user.mu.Lock()
	asked := slices.Clone(user.asked)
	user.mu.Unlock()
	if !slices.Equal(asked, []string{"Which file?", "Which file?"}) {
		t.Errorf("the user was asked %q; want the question once per call", asked)
	}
	t.Run("plan step, no elicitation", func(t *testing.T) {
		_, env := runPlan(t, plain, step)
		a := env.Artifact
		if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 1 || a.Pending[0].Tool != "ask_user" || a.Pending[0].Agent != agents.ToolName("asker") {
			t.Fatalf("status %s, pending %+v, errors %v", a.Status, a.Pending, a.Errors)
		}
	})
}

// TestAgentWithClientFinalToolStarts: an agent whose tools include a tool
// the configuration marks client-final (client_final_tools) starts with
// the server, and its call of that tool is handed to the client: the run
// pauses with it pending, and the tool does not run here.
func TestAgentWithClientFinalToolStarts(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "b.txt")
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("fs__write_file", `{"path": "`+target+`", "content": "beta"}`)
		}
		return fakeopenai.Text("written: " + r.ToolResults()[0])
	})
	_, cs := agentsApp(t, fake.URL(), dir, map[string]agents.Config{
		"writer": {Description: "Writes files.", Instructions: "You are writer.", Tools: []string{"fs__write_file"}},
	}, func(cfg *config.Config) { cfg.ClientFinalTools = []string{"fs__write_*"} })
	_, env := runPlan(t, cs, plan(map[string]any{"id": "write", "agent": "writer", "prompt": "write b.txt"}))
	a := env.Artifact
	if a.Status != orchestrate.StatusAwaitingClient || len(a.Pending) != 1 || a.Pending[0].Tool != "fs__write_file" || a.Pending[0].Agent != agents.ToolName("writer") {
		t.Fatalf("status %s, pending %+v, errors %v", a.Status, a.Pending, a.Errors)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the client-final tool ran on the server: %v", err)
	}
	_, env = runPlan(t, cs, map[string]any{"resume": map[string]any{"exec_id": a.Resume.ExecID, "results": map[string]any{a.Pending[0].CallID: map[string]any{"content": "Successfully wrote to b.txt"}}}})
	if a = env.Artifact; a.Status != orchestrate.StatusSuccess || !strings.HasPrefix(agentOutput(t, a.Steps[0]).Result.Text, "written: ") {
		t.Fatalf("after the resume: status %s, errors %v, validation %v", a.Status, a.Errors, a.ValidationErrors)
	}
}
