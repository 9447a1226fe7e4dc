package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// agentsApp starts an app whose planner (and so every agent's) model is the
// fake at url, with the real filesystem server over dir, and a client.
func agentsApp(t *testing.T, url, dir string, as map[string]agents.Config, edit func(*config.Config)) (*server.App, *mcp.ClientSession) {
	t.Helper()
	cfg := config.Default()
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"fs": npmServer(t, "server-filesystem", dir)}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake-model", BaseURL: url, MaxRetries: -1}}
	cfg.Agents = as
	if edit != nil {
		edit(cfg)
	}
	app, err := server.New(t.Context(), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return app, cs
}

// run calls agent_orchestrate with args and decodes the envelope.
func runPlan(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, *orchestrate.Envelope) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var env orchestrate.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Artifact == nil {
		t.Fatalf("decoding the envelope: %v\n%s", err, data)
	}
	return res, &env
}

// output returns a step's output as an ExecutionResponse.
func agentOutput(t *testing.T, rec *orchestrate.StepRecord) agents.ExecutionResponse {
	t.Helper()
	data, _ := json.Marshal(rec.Output)
	var r agents.ExecutionResponse
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("step %s: the output is no ExecutionResponse: %v\n%s", rec.ID, err, data)
	}
	return r
}

func readExecution(t *testing.T, cs *mcp.ClientSession, execID string) server.Execution {
	t.Helper()
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.RecordURI(execID)})
	if err != nil {
		t.Fatalf("reading the record of %s: %v", execID, err)
	}
	var e server.Execution
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAgentsFanOutReport: a plan fans out to two agents in a parallel
// group; each reads a file with the real filesystem server in its own
// loop (its model, the fake, is told which agent it is by its
// instructions); a render step merges their answers into a report. Each
// agent run is a child execution readable as a resource, linked to the
// plan's run, with its model and tool calls as its steps.
func TestAgentsFanOutReport(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.txt": "alpha", "b.txt": "beta"})
	var mu sync.Mutex
	offered := map[string][]string{}
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		name, file := "reader_b", "b.txt"
		if strings.Contains(r.System(), "reader_a") {
			name, file = "reader_a", "a.txt"
		}
		mu.Lock()
		offered[name] = r.ToolNames()
		mu.Unlock()
		results := r.ToolResults()
		if len(results) == 0 {
			return fakeopenai.Call("fs__read_text_file", `{"path": "`+filepath.Join(dir, file)+`"}`)
		}
		var out struct {
			Content string `json:"content"`
		}
		json.Unmarshal([]byte(results[0]), &out)
		return fakeopenai.Text(name + " read " + out.Content)
	})
	_, cs := agentsApp(t, fake.URL(), dir, map[string]agents.Config{
		"reader_a": {Description: "Reads file a.", Instructions: "You are reader_a.", Tools: []string{"fs__read_text_file"}},
		"reader_b": {Description: "Reads file b.", Instructions: "You are reader_b.", Tools: []string{"fs__read_*"}},
	}, nil)

	_, env := runPlan(t, cs, plan(
		map[string]any{"id": "readers", "parallel": []any{
			map[string]any{"id": "ra", "agent": "reader_a", "prompt": "Read a.txt"},
			map[string]any{"id": "rb", "agent_id": "reader_b", "prompt": "Read b.txt"},
		}},
		map[string]any{"id": "report", "tool": "render", "arguments": map[string]any{
			"template": "A: {{.a}} / B: {{.b}}", "values": map[string]any{"a": "$ra.output.result.text", "b": "$rb.output.result.text"}}},
	))
	a := env.Artifact
	if a.Status != orchestrate.StatusSuccess {
		t.Fatalf("status %s, errors %v", a.Status, a.Errors)
	}
	if got := a.Steps[1].Output.(map[string]any)["text"]; got != "A: reader_a read alpha / B: reader_b read beta" {
		t.Errorf("report = %q", got)
	}
	// The agents' model use rolls up into the plan's envelope.
	if u := a.Agents; u == nil || *u != (orchestrate.AgentUsage{Runs: 2, ModelCalls: 4, ToolCalls: 2, TokensIn: 40, TokensOut: 20}) {
		t.Errorf("artifact.agents = %+v", u)
	}
	for _, c := range a.Steps[0].Children {
		if c.Type != "agent" || c.Tool != agents.ToolName(map[string]string{"ra": "reader_a", "rb": "reader_b"}[c.ID]) {
			t.Errorf("step %s: type %s, tool %s; want an agent step", c.ID, c.Type, c.Tool)
		}
		out := agentOutput(t, c)
		if out.Status != agents.StatusSuccess || out.Metadata.ModelCalls != 2 || out.Metadata.ToolCalls != 1 || out.Metadata.TokensIn != 20 || out.Metadata.ExecID == "" {
			t.Errorf("step %s: response %+v", c.ID, out)
		}
		// The child execution, linked to the plan's run.
		rec := readExecution(t, cs, out.Metadata.ExecID)
		if rec.ParentExecID != env.Metadata.ExecID || rec.Parent != server.RecordURI(env.Metadata.ExecID) || rec.Tool != c.Tool || rec.Status != "success" {
			t.Errorf("child record of %s: parent %q (want %q), tool %s, status %s", c.ID, rec.ParentExecID, env.Metadata.ExecID, rec.Tool, rec.Status)
		}
		var steps []string
		for _, s := range rec.Records {
			steps = append(steps, s.StepID+" "+s.Tool+" "+s.Status)
		}
		want := []string{"model_0 openai:fake-model success", "call_0 fs__read_text_file success", "model_2 openai:fake-model success"}
		if !slices.Equal(steps, want) {
			t.Errorf("child steps of %s = %v; want %v", c.ID, steps, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(offered["reader_a"], []string{"fs__read_text_file"}) {
		t.Errorf("reader_a was offered %v; want only its allowed tool", offered["reader_a"])
	}
	for _, n := range offered["reader_b"] {
		if !strings.HasPrefix(n, "fs__read_") {
			t.Errorf("reader_b was offered %s, outside fs__read_*", n)
		}
	}
}

// TestAgentsFirstSuccess: in a first_success group the fast agent answers
// only once the slow one was asked (deterministic, no timers), and the
// slow one, still waiting on its model, is cancelled.
func TestAgentsFirstSuccess(t *testing.T) {
	slowAsked := make(chan struct{})
	var once sync.Once
	slowGone := make(chan struct{})
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if strings.Contains(r.System(), "slow") {
			once.Do(func() { close(slowAsked) })
			<-ctx.Done() // it never answers; the race's end cancels the request
			close(slowGone)
			return fakeopenai.Reply{}
		}
		<-slowAsked
		return fakeopenai.Text("fast answer")
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"fast": {Description: "Answers fast.", Instructions: "You are fast."},
		"slow": {Description: "Answers slowly.", Instructions: "You are slow."},
	}, nil)
	_, env := runPlan(t, cs, plan(map[string]any{"id": "race", "merge": "first_success", "parallel": []any{
		map[string]any{"id": "s", "agent": "slow", "prompt": "go"},
		map[string]any{"id": "f", "agent": "fast", "prompt": "go"},
	}}))
	a := env.Artifact
	g := a.Steps[0]
	if a.Status != orchestrate.StatusSuccess || g.Status != orchestrate.StatusSuccess {
		t.Fatalf("status %s, group %s, errors %v", a.Status, g.Status, a.Errors)
	}
	if g.Children[0].Status != orchestrate.StatusCancelled || g.Children[1].Status != orchestrate.StatusSuccess {
		t.Errorf("slow %s, fast %s; want cancelled and success", g.Children[0].Status, g.Children[1].Status)
	}
	if out := agentOutput(t, g.Children[1]); out.Result.Text != "fast answer" {
		t.Errorf("the fast agent's answer = %+v", out.Result)
	}
	<-slowGone // the slow agent's model request was cancelled
}

// TestAgentsOutputSchema: an agent with an output_schema answers JSON that
// feeds the next step through result.data; the JSON schema mode is asked
// for; a template into a field the schema lacks fails at plan time and
// runs nothing.
func TestAgentsOutputSchema(t *testing.T) {
	var mu sync.Mutex
	var formats []string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		mu.Lock()
		formats = append(formats, string(r.ResponseFormat))
		mu.Unlock()
		return fakeopenai.Text(`{"word": "alpha", "count": 2}`)
	})
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"word": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"}}, "required": []any{"word", "count"}}
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"counter": {Description: "Counts words.", Instructions: "You are counter.", OutputSchema: schema},
	}, nil)
	_, env := runPlan(t, cs, plan(
		map[string]any{"id": "c", "agent": "counter", "prompt": "count"},
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "{{.w}} x{{.n}}",
			"values": map[string]any{"w": "$c.output.result.data.word", "n": "$c.output.result.data.count"}}},
	))
	if env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("status %s, errors %v", env.Artifact.Status, env.Artifact.Errors)
	}
	if got := env.Artifact.Steps[1].Output.(map[string]any)["text"]; got != "alpha x2" {
		t.Errorf("rendered %q", got)
	}
	mu.Lock()
	if len(formats) != 1 || !strings.Contains(formats[0], `"json_schema"`) || !strings.Contains(formats[0], `"word"`) {
		t.Errorf("response_format sent: %v", formats)
	}
	mu.Unlock()

	before := len(fake.Requests())
	res, env := runPlan(t, cs, plan(
		map[string]any{"id": "c", "agent": "counter", "prompt": "count"},
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "{{.x}}", "values": map[string]any{"x": "$c.output.result.data.missing"}}},
	))
	if !res.IsError || len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeFieldNotFound {
		t.Fatalf("want one field_not_found; got %+v", env.Artifact.ValidationErrors)
	}
	if is := env.Artifact.ValidationErrors[0]; !slices.Contains(is.AvailableFields, "word") {
		t.Errorf("the error does not name the schema's fields: %+v", is)
	}
	if len(fake.Requests()) != before {
		t.Error("the model was called for a plan that did not validate")
	}
}

// TestAgentsAllowlist: an agent that calls a tool outside its allowlist is
// refused, told which tools it has, and the tool does not run.
func TestAgentsAllowlist(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.txt": "alpha"})
	var told string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if res := r.ToolResults(); len(res) > 0 {
			told = res[0]
			return fakeopenai.Text("I could not write.")
		}
		return fakeopenai.Call("fs__write_file", `{"path": "`+filepath.Join(dir, "b.txt")+`", "content": "x"}`)
	})
	_, cs := agentsApp(t, fake.URL(), dir, map[string]agents.Config{
		"narrow": {Description: "Reads only.", Instructions: "You are narrow.", Tools: []string{"fs__read_text_file", "render"}},
	}, nil)
	_, env := runPlan(t, cs, plan(map[string]any{"id": "n", "agent": "narrow", "prompt": "write b.txt"}))
	if !strings.Contains(told, `"fs__write_file" is not allowed for agent narrow`) || !strings.Contains(told, "its tools are fs__read_text_file, render") {
		t.Errorf("the model was told %q", told)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
		t.Error("the refused tool ran: b.txt exists")
	}
	out := agentOutput(t, env.Artifact.Steps[0])
	rec := readExecution(t, cs, out.Metadata.ExecID)
	if len(rec.Records) < 2 || rec.Records[1].Tool != "fs__write_file" || rec.Records[1].Status != "failed" || !strings.Contains(string(rec.Records[1].Error), string(orchestrate.CodeForbiddenTool)) {
		t.Errorf("the refused call is not a failed step of the child run: %+v", rec.Records)
	}
}

// TestAgentsMaxToolSteps: an agent whose model never stops calling tools
// ends after max_tool_steps turns with the code max_tool_steps; as its
// tool calls brought results, it answers partial with them (the step is
// partial, the plan goes on and ends partial). TestAgentPartial has the
// loop without results, which fails its step.
func TestAgentsMaxToolSteps(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.txt": "alpha"})
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Call("fs__read_text_file", `{"path": "`+filepath.Join(dir, "a.txt")+`"}`)
	})
	_, cs := agentsApp(t, fake.URL(), dir, map[string]agents.Config{
		"looper": {Description: "Loops.", Instructions: "You are looper.", Tools: []string{"fs__*"}, MaxToolSteps: 3},
	}, nil)
	res, env := runPlan(t, cs, plan(map[string]any{"id": "l", "agent": "looper", "prompt": "loop"}))
	st := env.Artifact.Steps[0]
	if !res.IsError || env.Artifact.Status != orchestrate.StatusPartial || st.Status != orchestrate.StatusPartial || st.Error == nil || st.Error.Code != orchestrate.CodeMaxToolSteps {
		t.Fatalf("plan %s, step %s, error %+v; want partial with max_tool_steps", env.Artifact.Status, st.Status, st.Error)
	}
	out := agentOutput(t, st)
	if out.Status != agents.StatusPartial || out.Error == nil || out.Error.Code != orchestrate.CodeMaxToolSteps || !strings.Contains(out.Error.Message, "after 3 turns") {
		t.Errorf("response = %+v, error %+v", out, out.Error)
	}
	if !strings.Contains(out.Result.Text, "fs__read_text_file") || !strings.Contains(out.Result.Text, "alpha") {
		t.Errorf("the partial result does not carry the tool results: %q", out.Result.Text)
	}
	if out.Metadata.ToolCalls != 3 || out.Metadata.ModelCalls != 4 {
		t.Errorf("tool calls %d, model calls %d; want 3 and 4", out.Metadata.ToolCalls, out.Metadata.ModelCalls)
	}
}

// TestAgentsDepth: an agent allowed agent_orchestrate starts a nested
// plan that calls the agent again; with max_depth 2 that second agent's
// orchestration is refused with depth_exceeded. Each agent then answers
// without what its orchestration would have brought: partial, with the
// code depth_exceeded, up to the plan.
func TestAgentsDepth(t *testing.T) {
	var mu sync.Mutex
	var inner []string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		res := r.ToolResults()
		if len(res) > 0 {
			if strings.Contains(r.User(), "inner") {
				mu.Lock()
				inner = append(inner, res[0])
				mu.Unlock()
			}
			return fakeopenai.Text("done")
		}
		if strings.Contains(r.User(), "inner") {
			return fakeopenai.Call("agent_orchestrate", `{"plan": {"steps": [{"tool": "render", "arguments": {"template": "x"}}]}}`)
		}
		return fakeopenai.Call("agent_orchestrate", `{"plan": {"steps": [{"id": "again", "agent": "boss", "prompt": "inner"}]}}`)
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		// Its nested plan may call only what boss may: itself, here.
		"boss": {Description: "Delegates.", Instructions: "You are boss.", Tools: []string{"agent_orchestrate", "agent__boss"}},
	}, func(c *config.Config) { c.Limits.MaxDepth = 2 })
	_, env := runPlan(t, cs, plan(map[string]any{"id": "b", "agent": "boss", "prompt": "outer"}))
	if st := env.Artifact.Steps[0]; env.Artifact.Status != orchestrate.StatusPartial || st.Error == nil || st.Error.Code != orchestrate.CodeDepthExceeded {
		t.Fatalf("status %s, errors %v; want partial with depth_exceeded", env.Artifact.Status, env.Artifact.Errors)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(inner) != 1 || !strings.Contains(inner[0], string(orchestrate.CodeDepthExceeded)) {
		t.Errorf("the inner agent's orchestration was told %q; want depth_exceeded", inner)
	}
}

// TestAgentsPlannerSeesThem: the planner is offered the agents as tools,
// with their descriptions and the output fields its plans may reference.
func TestAgentsPlannerSeesThem(t *testing.T) {
	var mu sync.Mutex
	var planning []*fakeopenai.Request
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		mu.Lock()
		planning = append(planning, r)
		mu.Unlock()
		return fakeopenai.Text("no plan")
	})
	schema := map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"type": "string"}}}
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"critic": {Description: "Judges drafts harshly.", OutputSchema: schema},
	}, nil)
	runPlan(t, cs, map[string]any{"prompt": "judge my draft"})
	mu.Lock()
	defer mu.Unlock()
	if len(planning) == 0 {
		t.Fatal("the planner made no model call")
	}
	data, _ := json.Marshal(planning[0])
	for _, want := range []string{"agent__critic", "Judges drafts harshly", "verdict"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the planning request does not mention %q", want)
		}
	}
}

// TestAgentsTimeout: an agent whose model does not answer within its
// step's deadline fails the step with the code timeout.
func TestAgentsTimeout(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		<-ctx.Done() // never answers; the step's deadline ends the request
		return fakeopenai.Reply{}
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"sleepy": {Description: "Never answers."},
	}, nil)
	res, env := runPlan(t, cs, plan(map[string]any{"id": "s", "agent": "sleepy", "prompt": "go", "timeout_ms": 300}))
	st := env.Artifact.Steps[0]
	if !res.IsError || st.Error == nil || st.Error.Code != orchestrate.CodeTimeout {
		t.Fatalf("step %s, error %+v; want the code timeout", st.Status, st.Error)
	}
}

// TestTenantAgentTools: a tenant's caller runs an agent only within the
// tenant's tools (never agent_orchestrate), whatever the agent's globs
// match; the agent's child run is the caller's, in the caller's tenant.
func TestTenantAgentTools(t *testing.T) {
	var mu sync.Mutex
	var offered []string
	var told string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		mu.Lock()
		defer mu.Unlock()
		offered = r.ToolNames()
		if res := r.ToolResults(); len(res) > 0 {
			told = res[0]
			return fakeopenai.Text("done")
		}
		return fakeopenai.Call("b_probe", `{"label": "x"}`)
	})
	cfg := tenantConfig(t)
	cfg.Tenants["a"] = config.Tenant{Match: cfg.Tenants["a"].Match, Tools: []string{"a_*", "agent__*"}}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Helps.", Tools: []string{"*_probe", "agent_orchestrate"}}}
	pa, pb := &probe{}, &probe{}
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, "alice-secret-token")

	_, env := runPlan(t, alice, plan(map[string]any{"id": "h", "agent": "helper", "prompt": "probe"}))
	if env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("status %s, errors %v", env.Artifact.Status, env.Artifact.Errors)
	}
	mu.Lock()
	if !slices.Equal(offered, []string{"a_probe"}) || !strings.Contains(told, "not allowed") {
		t.Errorf("the agent was offered %v and told %q; want only a_probe, and b_probe refused", offered, told)
	}
	mu.Unlock()
	if pb.calls.Load() != 0 {
		t.Errorf("b_probe ran %d times for tenant a's agent", pb.calls.Load())
	}
	out := agentOutput(t, env.Artifact.Steps[0])
	run, _, err := app.Store().Get(t.Context(), out.Metadata.ExecID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Tenant != "a" || run.UserID != "alice" || run.ParentExecID != env.Metadata.ExecID {
		t.Errorf("the agent's run: tenant %q, user %q, parent %q", run.Tenant, run.UserID, run.ParentExecID)
	}
}
