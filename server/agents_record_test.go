package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestAgentChildRecordMatchesEnvelopeSchema: the record of an agent's run
// (a child execution, read as orchestra://executions/{id}) holds an
// envelope whose steps are its model calls, its tool calls (one failed)
// and a refused call; it matches the published complete envelope schema
// (schemas/envelope.json), every field of it declared there, and the
// lean one agent_orchestrate publishes as its outputSchema.
func TestAgentChildRecordMatchesEnvelopeSchema(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		switch len(r.ToolResults()) {
		case 0:
			good, bad := fakeopenai.Call("fetch", `{"label": "good"}`), fakeopenai.Call("fetch", `{"label": "bad"}`)
			good.ToolCalls[0].ID, bad.ToolCalls[0].ID = "c1", "c2"
			return fakeopenai.Reply{ToolCalls: append(good.ToolCalls, bad.ToolCalls...)}
		case 2:
			return fakeopenai.Call("render", `{"template": "x"}`) // not among its tools
		}
		return fakeopenai.Text("done")
	})
	cs := partialApp(t, fake.URL(), "recorded")
	_, env := runPlan(t, cs, plan(map[string]any{"id": "r", "agent": "recorded", "prompt": "fetch"}))
	out := agentOutput(t, env.Artifact.Steps[0])
	rec := readExecution(t, cs, out.Metadata.ExecID)
	if rec.ParentExecID != env.Metadata.ExecID || len(rec.Envelope) == 0 {
		t.Fatalf("the child record: parent %q (want %q), envelope %d bytes", rec.ParentExecID, env.Metadata.ExecID, len(rec.Envelope))
	}
	var doc any
	if err := json.Unmarshal(rec.Envelope, &doc); err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	var child orchestrate.Envelope
	if err := json.Unmarshal(rec.Envelope, &child); err != nil {
		t.Fatal(err)
	}
	for _, s := range child.Artifact.Steps {
		types[s.Type]++
	}
	if types["model"] != 3 || types["tool"] != 3 {
		t.Errorf("the child's steps by type: %v; want 3 model and 3 tool", types)
	}

	raw, err := os.ReadFile("../schemas/envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	var complete map[string]any
	if err := json.Unmarshal(raw, &complete); err != nil {
		t.Fatal(err)
	}
	_, tools := listedTools(t)
	var lean []byte
	for _, tool := range tools {
		if tool.Name == orchestrate.ToolName {
			lean, _ = json.Marshal(tool.OutputSchema)
		}
	}
	for name, data := range map[string][]byte{"schemas/envelope.json": raw, "the published outputSchema": lean} {
		var s jsonschema.Schema
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Validate(doc); err != nil {
			t.Errorf("the child record's envelope does not match %s: %v\n%s", name, err, rec.Envelope)
		}
	}
	for _, p := range undeclared(complete, complete, doc, "") {
		t.Errorf("the child record's envelope carries %s, which schemas/envelope.json does not declare", p)
	}
}

// TestAgentRecordCountsItsSteps: an agent's tool calls write nothing the
// store refuses (they used to queue the request of an unrecorded one-step
// run, and every call logged a FOREIGN KEY failure), and the agent's
// record counts the steps it holds, which it made as it went.
func TestAgentRecordCountsItsSteps(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		return fetchThen("done", "a", "b")(r)
	})
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"counted": {Description: "Fetches.", Instructions: "You are counted.", Tools: []string{"fetch"}, MaxToolSteps: 4}}
	logs := &servertest.SyncBuffer{}
	app, err := server.New(t.Context(), cfg, server.Options{Version: "test", Tools: []registry.Tool{fetchTool(t)},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectInMemory(t, app, v20251125)
	_, env := runPlan(t, cs, plan(map[string]any{"id": "r", "agent": "counted", "prompt": "fetch"}))
	out := agentOutput(t, env.Artifact.Steps[0])
	rec := readExecution(t, cs, out.Metadata.ExecID)
	if len(rec.Records) != 5 || rec.Steps != len(rec.Records) {
		t.Errorf("the agent's record says steps %d and holds %d step records (want 5: three model calls, two tool calls)", rec.Steps, len(rec.Records))
	}
	if err := app.Store().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the agent's run logged: %s", line)
		}
	}
}
