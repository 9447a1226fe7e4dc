package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
	"github.com/orchestra-mcp/orchestra/workflows"
)

// greetPlan is what the fake planner writes: render a greeting, return it.
const greetPlan = `{"type":"tool_calls","schedule":"sequential","reasoning":"render it","answer":null,
	"calls":[{"tool_name":"render","arguments":{"template":"hello {{.who}}","values":{"who":"ana"}}}],
	"return":{"greeting":"$0.output.text"}}`

// listChanged returns client options whose list_changed notifications
// arrive on the channel.
func listChanged() (*mcp.ClientOptions, chan struct{}) {
	ch := make(chan struct{}, 16)
	return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}}, ch
}

func toolNamed(t *testing.T, cs *mcp.ClientSession, name string) *mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			return tool
		}
	}
	return nil
}

// TestWorkflowSavedFromPromptRunsWithoutModel: a prompt-path run with
// save_as becomes the tool workflow__greet (clients are told with
// list_changed); a call with a new template runs the saved plan and
// returns its return value, and the model is not asked again; arguments
// that do not match the inferred parameters are refused with the schema's
// error; saving again makes version 2, which calls then use.
func TestWorkflowSavedFromPromptRunsWithoutModel(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Call(planner.ToolName, greetPlan)
	})
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake-model", BaseURL: fake.URL(), MaxRetries: -1}}
	app := newApp(t, cfg)
	opts, changed := listChanged()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if toolNamed(t, cs, "workflow__greet") != nil {
		t.Fatal("workflow__greet is listed before it was saved")
	}
	_, env := runPlan(t, cs, map[string]any{"prompt": "greet ana", "save_as": map[string]any{"name": "greet", "description": "Greets someone."}})
	if !env.Artifact.Success {
		t.Fatalf("the prompt run failed: %+v %+v", env.Artifact.Errors, env.Artifact.ValidationErrors)
	}
	if w := env.Metadata.Workflow; w == nil || w.Name != "greet" || w.Version != 1 || w.Tool != "workflow__greet" {
		t.Fatalf("_metadata.workflow = %+v", env.Metadata.Workflow)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the save")
	}
	tool := toolNamed(t, cs, "workflow__greet")
	if tool == nil {
		t.Fatal("workflow__greet is not listed after the save")
	}
	checkToolRules(t, tool)
	in, _ := json.Marshal(tool.InputSchema)
	out, _ := json.Marshal(tool.OutputSchema)
	if !strings.Contains(string(in), `"template"`) || !strings.Contains(string(in), `"default":"hello {{.who}}"`) {
		t.Errorf("inputSchema = %s; want the template parameter with its default", in)
	}
	if !strings.Contains(string(out), `"greeting"`) {
		t.Errorf("outputSchema = %s; want the return's greeting", out)
	}
	asked := len(fake.Requests())
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__greet", Arguments: map[string]any{"template": "bye {{.who}}"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("workflow__greet failed: %s", servertest.Text(res))
	}
	got, _ := json.Marshal(res.StructuredContent)
	if string(got) != `{"greeting":"bye ana"}` {
		t.Errorf("structuredContent = %s; want {\"greeting\":\"bye ana\"}", got)
	}
	if n := len(fake.Requests()); n != asked {
		t.Errorf("the model was asked %d more times for a workflow call; want none", n-asked)
	}
	// Left out, a parameter takes the run's value.
	res, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__greet", Arguments: map[string]any{}})
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"greeting":"hello ana"}` {
		t.Errorf("with defaults: %s (%s)", got, servertest.Text(res))
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__greet", Arguments: map[string]any{"template": 42}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(servertest.Text(res), "template") || !strings.Contains(servertest.Text(res), "workflow__greet (version 1)") {
		t.Errorf("wrong parameters: isError %v, %q; want the schema's error about template", res.IsError, servertest.Text(res))
	}
	// A plan step calling it is checked against its own parameters (not
	// the catalog's neutral tool of the name) before anything runs.
	_, env = runPlan(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "workflow__greet", "arguments": map[string]any{"template": 42}}}}})
	if env.Artifact.Success || len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeInvalidArguments {
		t.Errorf("a plan step with a wrong parameter: %+v %+v; want invalid_arguments at plan time", env.Artifact.ValidationErrors, env.Artifact.Errors)
	}
	// The run it made is recorded with the version.
	runs, _, err := app.Store().List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(runs, func(r store.Run) bool { return r.Tool == "workflow__greet@1" }) {
		t.Errorf("no run recorded as workflow__greet@1")
	}
	// Saved again: version 2.
	_, env = runPlan(t, cs, map[string]any{"prompt": "greet ana", "save_as": map[string]any{"name": "greet"}})
	if w := env.Metadata.Workflow; w == nil || w.Version != 2 {
		t.Fatalf("second save: _metadata.workflow = %+v", env.Metadata.Workflow)
	}
	tool = toolNamed(t, cs, "workflow__greet")
	if tool == nil || !strings.Contains(tool.Description, "version 2") {
		t.Errorf("after the second save the tool is %+v", tool)
	}
	// Deleted: clients are told, and it is gone.
	for len(changed) > 0 {
		<-changed
	}
	if n, err := app.DeleteWorkflow(t.Context(), "", "", "greet"); err != nil || n != 2 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the delete")
	}
	if toolNamed(t, cs, "workflow__greet") != nil {
		t.Error("workflow__greet is listed after its delete")
	}
}

// TestWorkflowNotSavedSaysWhy: save_as on a run that failed keeps nothing
// and says why in a warning; the run's own result stands.
func TestWorkflowNotSavedSaysWhy(t *testing.T) {
	app := newApp(t, config.Default())
	cs := connectInMemory(t, app, "")
	_, env := runPlan(t, cs, map[string]any{
		"plan":    map[string]any{"steps": []any{map[string]any{"id": "q", "tool": "json_query", "arguments": map[string]any{"query": ".a.b | error", "input": map[string]any{}}}}},
		"save_as": map[string]any{"name": "broken"},
	})
	if env.Artifact.Success || env.Metadata.Workflow != nil {
		t.Fatalf("success %v, workflow %+v", env.Artifact.Success, env.Metadata.Workflow)
	}
	if !slices.ContainsFunc(env.Artifact.Warnings, func(is *orchestrate.Issue) bool { return is.Code == orchestrate.CodeWorkflowNotSaved }) {
		t.Errorf("warnings = %+v; want %s", env.Artifact.Warnings, orchestrate.CodeWorkflowNotSaved)
	}
	if toolNamed(t, cs, "workflow__broken") != nil {
		t.Error("a failed run was saved")
	}
	_, env = runPlan(t, cs, map[string]any{"plan": map[string]any{"steps": []any{}}, "save_as": map[string]any{"name": "bad name!"}})
	if !slices.ContainsFunc(env.Artifact.ValidationErrors, func(is *orchestrate.Issue) bool {
		return is.Path == "save_as.name" && strings.Contains(is.Message, "workflow name")
	}) {
		t.Errorf("a bad name: %+v", env.Artifact.ValidationErrors)
	}
}

// TestConfiguredWorkflowCheckedAgainstCatalog: a workflow of the
// configuration is listed with its parameters, called from a plan step and
// directly; once the tool it calls changes shape, a call fails before
// anything runs, naming the workflow, its version, the step and the field.
func TestConfiguredWorkflowCheckedAgainstCatalog(t *testing.T) {
	pa := &probe{}
	cfg := config.Default()
	cfg.Workflows = map[string]workflows.Config{"echo": {
		Description: "Echoes a label.",
		Version:     3,
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{"label": map[string]any{"type": "string"}}, "required": []any{"label"}},
		Plan: map[string]any{
			"steps":  []any{map[string]any{"id": "say", "tool": "a_probe", "arguments": map[string]any{"label": "$bindings.label"}}},
			"return": map[string]any{"said": "$say.output.label"},
		},
	}}
	app := newApp(t, cfg, pa.tool(t, "a_probe"))
	cs := connectInMemory(t, app, "")
	tool := toolNamed(t, cs, "workflow__echo")
	if tool == nil {
		t.Fatal("workflow__echo is not listed")
	}
	checkToolRules(t, tool)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__echo", Arguments: map[string]any{"label": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("direct call: %v %s", err, servertest.Text(res))
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"said":"hi"}` {
		t.Errorf("direct call returned %s", got)
	}
	// From a plan, with a template into its output checked against the
	// outputSchema.
	_, env := runPlan(t, cs, map[string]any{"plan": map[string]any{
		"steps":  []any{map[string]any{"id": "w", "tool": "workflow__echo", "arguments": map[string]any{"label": "from a plan"}}},
		"return": "$w.output.said",
	}})
	if !env.Artifact.Success || env.Artifact.Result != "from a plan" {
		t.Fatalf("plan calling the workflow: %+v %+v result %v", env.Artifact.Errors, env.Artifact.ValidationErrors, env.Artifact.Result)
	}
	_, env = runPlan(t, cs, map[string]any{"plan": map[string]any{
		"steps":  []any{map[string]any{"id": "w", "tool": "workflow__echo", "arguments": map[string]any{"label": "x"}}},
		"return": "$w.output.nope",
	}, "dry_run": true})
	if len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeFieldNotFound {
		t.Errorf("a template into a field the workflow does not return: %+v", env.Artifact.ValidationErrors)
	}
	// The tool changes shape: label is now "text".
	calls := pa.calls.Load()
	changed := registry.Tool{Name: "a_probe", Source: "test", Description: "Echoes its text.",
		InputSchema: mustSchema(t, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
		Call:        pa.tool(t, "a_probe").Call}
	if err := app.Catalog.ReplaceSource("test", []registry.Tool{changed}); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__echo", Arguments: map[string]any{"label": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	msg := servertest.Text(res)
	for _, want := range []string{`workflow "echo" version 3`, `step "say"`, "plan.steps[0].arguments.label"} {
		if !res.IsError || !strings.Contains(msg, want) {
			t.Errorf("after the change: isError %v, %q; want it to name %s", res.IsError, msg, want)
		}
	}
	if pa.calls.Load() != calls {
		t.Error("the changed tool was called")
	}
}

// TestWorkflowStepsDrawFromCallerBudget: a workflow's steps count against
// its caller's request: with max_tool_calls 2, a plan that calls a
// workflow of two probe calls runs out inside it.
func TestWorkflowStepsDrawFromCallerBudget(t *testing.T) {
	pa := &probe{}
	cfg := config.Default()
	cfg.Limits.MaxToolCalls = 2
	cfg.Workflows = map[string]workflows.Config{"twice": {
		Plan: map[string]any{"steps": []any{
			map[string]any{"id": "one", "tool": "a_probe", "arguments": map[string]any{"label": "1"}},
			map[string]any{"id": "two", "tool": "a_probe", "arguments": map[string]any{"label": "2"}},
		}},
	}}
	app := newApp(t, cfg, pa.tool(t, "a_probe"))
	cs := connectInMemory(t, app, "")
	_, env := runPlan(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"id": "w", "tool": "workflow__twice"}}}})
	if env.Artifact.Success {
		t.Fatal("the plan succeeded past max_tool_calls")
	}
	data, _ := json.Marshal(env.Artifact.Steps)
	if !strings.Contains(string(data), string(orchestrate.CodeLimitExceeded)) {
		t.Errorf("steps = %s; want %s from inside the workflow", data, orchestrate.CodeLimitExceeded)
	}
	if pa.calls.Load() != 1 {
		t.Errorf("a_probe ran %d times; want 1 (the workflow step took the other call)", pa.calls.Load())
	}
}

// TestWorkflowCallingItselfStopsAtMaxDepth: each call of a workflow is one
// level deeper, so one that calls itself stops at limits.max_depth.
func TestWorkflowCallingItselfStopsAtMaxDepth(t *testing.T) {
	cfg := config.Default()
	cfg.Workflows = map[string]workflows.Config{"again": {
		Plan: map[string]any{"steps": []any{map[string]any{"id": "self", "tool": "workflow__again"}}},
	}}
	app := newApp(t, cfg)
	cs := connectInMemory(t, app, "")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__again", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(servertest.Text(res), string(orchestrate.CodeDepthExceeded)) {
		t.Errorf("isError %v, %q; want %s", res.IsError, servertest.Text(res), orchestrate.CodeDepthExceeded)
	}
}

// TestWorkflowsScopedByTenant: alice (tenant a) saves a workflow; bob
// (tenant b) neither lists it, nor calls it directly or from a plan, nor is
// told its name in a suggestion; alice does all of that.
func TestWorkflowsScopedByTenant(t *testing.T) {
	pa, pb := &probe{}, &probe{}
	cfg := tenantConfig(t)
	yes := true
	b := cfg.Tenants["b"]
	b.PlanningEnabled = &yes
	cfg.Tenants["b"] = b
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Call(planner.ToolName, `{"type":"tool_calls","schedule":"sequential","reasoning":"r","answer":null,"calls":[{"tool_name":"b_probe","arguments":{"label":"x"}}]}`)
	})
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake-model", BaseURL: fake.URL(), MaxRetries: -1}}
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, "alice-secret-token")
	bob := connectAs(t, srv, "bob-secret-token")
	_, env := runPlan(t, alice, map[string]any{
		"plan":    map[string]any{"steps": []any{map[string]any{"id": "p", "tool": "a_probe", "arguments": map[string]any{"label": "secret-report"}}}, "return": "$p.output.label"},
		"save_as": map[string]any{"name": "alice_report"},
	})
	if env.Metadata.Workflow == nil {
		t.Fatalf("alice's save: %+v", env.Artifact.Warnings)
	}
	if toolNamed(t, alice, "workflow__alice_report") == nil {
		t.Fatal("alice does not see her workflow")
	}
	if toolNamed(t, bob, "workflow__alice_report") != nil {
		t.Error("bob sees alice's workflow on tools/list")
	}
	// ops, in no tenant and narrowed by no glob, is another owner.
	ops := connectAs(t, srv, "ops-secret-token")
	if toolNamed(t, ops, "workflow__alice_report") != nil {
		t.Error("ops sees alice's workflow on tools/list")
	}
	if _, err := ops.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__alice_report", Arguments: map[string]any{}}); err == nil {
		t.Error("ops called alice's workflow")
	}
	if _, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__alice_report", Arguments: map[string]any{}}); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("bob calling alice's workflow: %v; want unknown tool, no suggestion", err)
	}
	if _, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__alice_repor", Arguments: map[string]any{}}); err == nil || strings.Contains(err.Error(), "alice_report") {
		t.Errorf("bob's near miss: %v; must not suggest alice's workflow", err)
	}
	_, env = runPlan(t, bob, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "workflow__alice_report", "arguments": map[string]any{}}}}})
	if env.Artifact.Success || len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeUnknownTool {
		t.Errorf("bob's plan calling it: %+v", env.Artifact.ValidationErrors)
	}
	if is := env.Artifact.ValidationErrors[0]; len(is.Suggestions) > 0 || len(is.AvailableFields) > 0 {
		t.Errorf("bob is told of tools: %+v", is)
	}
	if pa.calls.Load() != 1 {
		t.Errorf("a_probe ran %d times; want once (alice's run)", pa.calls.Load())
	}
	// The planner's prompt: alice's names her workflow, bob's does not.
	prompted := func(cs *mcp.ClientSession) string {
		before := len(fake.Requests())
		runPlan(t, cs, map[string]any{"prompt": "make the report"})
		data, _ := json.Marshal(fake.Requests()[before:])
		return string(data)
	}
	if p := prompted(alice); !strings.Contains(p, "workflow__alice_report") {
		t.Errorf("alice's planner is not offered her workflow")
	}
	if p := prompted(bob); strings.Contains(p, "alice_report") {
		t.Errorf("bob's planner prompt names alice's workflow")
	}
	// Names are per owner and tenant: bob's save of the name alice keeps
	// is his own workflow, answered as any save is (nothing says the name
	// is someone else's), and each sees and runs only his own.
	_, env = runPlan(t, bob, map[string]any{
		"plan":    map[string]any{"steps": []any{map[string]any{"id": "p", "tool": "b_probe", "arguments": map[string]any{"label": "x"}}}, "return": "$p.output.label"},
		"save_as": map[string]any{"name": "alice_report", "description": "Bob's own report."},
	})
	if w := env.Metadata.Workflow; w == nil || w.Version != 1 || len(env.Artifact.Warnings) > 0 {
		t.Fatalf("bob's save of a name alice keeps: %+v, warnings %+v; want his version 1, no warning", w, env.Artifact.Warnings)
	}
	bobs, alices := toolNamed(t, bob, "workflow__alice_report"), toolNamed(t, alice, "workflow__alice_report")
	if bobs == nil || !strings.Contains(bobs.Description, "Bob's own report.") || strings.Contains(bobs.Description, "a_probe") {
		t.Errorf("bob's tools/list shows %+v; want his own workflow", bobs)
	}
	if alices == nil || strings.Contains(alices.Description, "Bob") || !strings.Contains(alices.Description, "a_probe") {
		t.Errorf("alice's tools/list shows %+v; want her own workflow", alices)
	}
	if p := prompted(bob); strings.Contains(p, "a_probe") || strings.Contains(p, "secret-report") || !strings.Contains(p, "Bob's own report.") {
		t.Errorf("bob's planner prompt is not his own workflow's: %s", p)
	}
	if p := prompted(alice); strings.Contains(p, "Bob's own report.") {
		t.Errorf("alice's planner prompt names bob's workflow")
	}
	res, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__alice_report", Arguments: map[string]any{"label": "bob-again"}})
	if err != nil || res.IsError {
		t.Fatalf("bob's call: %v %s", err, servertest.Text(res))
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"result":"bob-again"}` || pb.calls.Load() == 0 {
		t.Errorf("bob's call returned %s (b_probe ran %d times)", got, pb.calls.Load())
	}
	res, err = alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__alice_report", Arguments: map[string]any{"label": "again"}})
	if err != nil || res.IsError {
		t.Fatalf("alice's call: %v %s", err, servertest.Text(res))
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"result":"again"}` || pa.calls.Load() != 2 {
		t.Errorf("alice's call returned %s (a_probe ran %d times; want 2)", got, pa.calls.Load())
	}
}

// checkToolRules fails when a listed tool's schemas break the tool API
// rules of the model providers: no oneOf, anyOf or allOf at the top, and
// items on every array.
func checkToolRules(t *testing.T, tool *mcp.Tool) {
	t.Helper()
	for what, s := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
		if s == nil {
			continue
		}
		data, _ := json.Marshal(s)
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s %s: %v", tool.Name, what, err)
		}
		if m["type"] != "object" {
			t.Errorf("%s %s: type %v, want object", tool.Name, what, m["type"])
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			if _, ok := m[k]; ok {
				t.Errorf("%s %s has %s at the top", tool.Name, what, k)
			}
		}
		var walk func(v any, at string)
		walk = func(v any, at string) {
			switch v := v.(type) {
			case map[string]any:
				if v["type"] == "array" || (slices.Contains(anySlice(v["type"]), "array")) {
					if _, ok := v["items"]; !ok {
						t.Errorf("%s %s: the array at %s has no items", tool.Name, what, at)
					}
				}
				for k, e := range v {
					walk(e, at+"/"+k)
				}
			case []any:
				for _, e := range v {
					walk(e, at)
				}
			}
		}
		walk(m, "")
	}
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestConfiguredWorkflowOverRealFilesystem: a configured workflow lists a
// directory with the real server-filesystem; when the server's tool is
// swapped for one with another schema (as a tools/list_changed of the
// server replaces it in the catalog), the change is logged and a call fails
// before anything runs, naming the workflow, its version, the step and the
// field.
func TestConfiguredWorkflowOverRealFilesystem(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := npmServer(t, "server-filesystem", dir)
	cfg := config.Default()
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"fs": fs}
	cfg.Workflows = map[string]workflows.Config{"ls": {
		Description: "Lists a directory.",
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{"dir": map[string]any{"type": "string"}}, "required": []any{"dir"}},
		Plan: map[string]any{
			"steps":  []any{map[string]any{"id": "list", "tool": "fs__list_directory", "arguments": map[string]any{"path": "$bindings.dir"}}},
			"return": map[string]any{"listing": "$list.output.content"},
		},
	}}
	var logs servertest.SyncBuffer
	app, err := server.New(t.Context(), cfg, server.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectInMemory(t, app, "")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__ls", Arguments: map[string]any{"dir": dir}})
	if err != nil || res.IsError {
		t.Fatalf("workflow__ls: %v %s", err, servertest.Text(res))
	}
	if got, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(got), "[FILE] notes.txt") {
		t.Errorf("workflow__ls returned %s", got)
	}
	list, ok := app.Catalog.Lookup("fs__list_directory")
	if !ok {
		t.Fatal("fs__list_directory is not in the catalog")
	}
	var tools []registry.Tool
	for _, tool := range app.Catalog.List() {
		if tool.Source != list.Source {
			continue
		}
		if tool.Name == list.Name {
			tool.InputSchema = mustSchema(t, `{"type":"object","properties":{"directory":{"type":"string"}},"required":["directory"],"additionalProperties":false}`)
		}
		tools = append(tools, tool)
	}
	if err := app.Catalog.ReplaceSource(list.Source, tools); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "a workflow does not fit the tools it calls") || !strings.Contains(logs.String(), "workflow=ls") {
		t.Errorf("the change was not logged:\n%s", logs.String())
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "workflow__ls", Arguments: map[string]any{"dir": dir}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`workflow "ls" version 1`, `step "list"`, "plan.steps[0].arguments"} {
		if !res.IsError || !strings.Contains(servertest.Text(res), want) {
			t.Errorf("after the swap: isError %v, %q; want it to name %s", res.IsError, servertest.Text(res), want)
		}
	}
	runs, _, _ := app.Store().List(t.Context(), store.ListOptions{})
	if n := len(slices.DeleteFunc(runs, func(r store.Run) bool { return r.Tool != "workflow__ls@1" })); n != 1 {
		t.Errorf("%d runs of workflow__ls@1 recorded; want 1 (the call after the swap runs nothing)", n)
	}
}

// TestWorkflowChangesByAnotherProcessReachClients: a workflow saved, then
// deleted, by another app on the same store file (as the command line's
// orchestra workflows import and delete do) reaches the running server's
// clients: notifications/tools/list_changed, and the tool listed, then not.
func TestWorkflowChangesByAnotherProcessReachClients(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	running, err := server.New(t.Context(), config.Default(), server.Options{Version: "test", Store: path, WorkflowPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { running.Close() })
	opts, changed := listChanged()
	cs := connectObs(t, running, opts)

	other, err := server.New(t.Context(), config.Default(), server.Options{Version: "test", Store: path, WorkflowPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	w, err := workflows.FromConfig("elsewhere", workflows.Config{Plan: map[string]any{
		"steps": []any{map[string]any{"id": "q", "tool": "json_query", "arguments": map[string]any{"query": ".", "input": map[string]any{"n": 1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.StoreWorkflow(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	waitListed := func(want bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for (toolNamed(t, cs, "workflow__elsewhere") != nil) != want {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("workflow__elsewhere listed = %v after another process's change; want %v (no list_changed)", !want, want)
			}
		}
	}
	waitListed(true)
	if _, err := other.DeleteWorkflow(t.Context(), "", "", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	waitListed(false)
}
