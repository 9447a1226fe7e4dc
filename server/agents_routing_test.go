package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// TestAgentRequestRouting: seed 003's request, whole. An exposed agent
// called directly is manual unless the caller says auto, echoes the
// request_id it is sent and makes one when it is sent none; its metadata
// names the tools it called and its configuration's version; its
// structuredContent matches its outputSchema, errors included. A
// selected_agent naming another agent, or a routing_mode that is neither,
// is refused with what was wrong and the fix. An agent that orchestra's
// planner chose, or that another agent called, is auto whatever its
// arguments say.
func TestAgentRequestRouting(t *testing.T) {
	var mu sync.Mutex
	var routerSaw []string // what the helper answered the router
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if slices.Contains(r.ToolNames(), planner.ToolName) {
			return fakeopenai.Call(planner.ToolName, `{"type": "tool_calls", "calls": [{"tool_name": "agent__helper", "arguments": {"user_query": "count", "routing_mode": "manual"}}]}`)
		}
		results := r.ToolResults()
		switch {
		case strings.Contains(r.System(), "router") && len(results) == 0:
			return fakeopenai.Call("agent__helper", `{"user_query": "count"}`)
		case strings.Contains(r.System(), "router"):
			mu.Lock()
			routerSaw = append(routerSaw, results...)
			mu.Unlock()
		case len(results) == 0:
			return fakeopenai.Call("json_query", `{"query": ".a", "input": {"a": 1}}`)
		}
		return fakeopenai.Text("done")
	})
	t.Setenv("ORCHESTRA_TEST_KEY", "k")
	model := llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), APIKeyEnv: "ORCHESTRA_TEST_KEY", MaxRetries: -1}
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: model}
	helper := agents.Config{Description: "Counts.", Instructions: "You are helper.", Tools: []string{"json_query"}, Expose: true}
	cfg.Agents = map[string]agents.Config{
		"helper": helper,
		"router": {Description: "Routes.", Instructions: "You are router.", Tools: []string{"agent__helper"}, Expose: true},
	}
	app := newApp(t, cfg)
	cs := connectInMemory(t, app, v20251125)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out *jsonschema.Resolved
	for _, tool := range list.Tools {
		if tool.Name == "agent__helper" {
			data, _ := json.Marshal(tool.OutputSchema)
			var s jsonschema.Schema
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			if out, err = s.Resolve(nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out == nil {
		t.Fatal("agent__helper is not listed")
	}
	call := func(args map[string]any) (*mcp.CallToolResult, agents.ExecutionResponse) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent__helper", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Validate(res.StructuredContent); err != nil {
			t.Errorf("the structuredContent of %v does not match the outputSchema: %v", args, err)
		}
		data, _ := json.Marshal(res.StructuredContent)
		var r agents.ExecutionResponse
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		return res, r
	}

	_, r := call(map[string]any{"user_query": "count"})
	if r.Status != agents.StatusSuccess || r.Metadata.RoutingMode != agents.RoutingManual {
		t.Errorf("a direct call: status %s, routing_mode %q; want success, manual", r.Status, r.Metadata.RoutingMode)
	}
	if _, err := uuid.Parse(r.RequestID); err != nil {
		t.Errorf("a request without request_id was given %q, not a made one", r.RequestID)
	}
	if !slices.Equal(r.Metadata.Tools, []string{"json_query"}) || r.Metadata.ConfigVersion != agents.ConfigVersion(helper) || r.Metadata.ConfigVersion == "" {
		t.Errorf("metadata: tools %v, config_version %q (want [json_query], %q)", r.Metadata.Tools, r.Metadata.ConfigVersion, agents.ConfigVersion(helper))
	}
	changed := helper
	changed.MaxToolSteps = 3
	if agents.ConfigVersion(changed) == r.Metadata.ConfigVersion {
		t.Error("the config version did not change with the block")
	}

	_, r = call(map[string]any{"user_query": "count", "routing_mode": "auto", "request_id": "r-1", "selected_agent": "helper", "parsed_parameters": map[string]any{"days": 7}})
	if r.Status != agents.StatusSuccess || r.Metadata.RoutingMode != agents.RoutingAuto || r.RequestID != "r-1" {
		t.Errorf("a routed call: status %s, routing_mode %q, request_id %q; want success, auto, r-1", r.Status, r.Metadata.RoutingMode, r.RequestID)
	}

	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"user_query": "count", "selected_agent": "router", "request_id": "r-2"}, []string{`selected_agent is "router"`, "agent helper", "call agent__router"}},
		{map[string]any{"user_query": "count", "selected_agent": "nobody"}, []string{`selected_agent is "nobody"`, `there is no agent "nobody"`}},
		{map[string]any{"user_query": "count", "routing_mode": "sideways"}, []string{`routing_mode is "sideways"`, `"auto"`, `"manual"`}},
	} {
		res, r := call(tc.args)
		if !res.IsError || r.Status != agents.StatusError || r.Error == nil || r.Error.Code != orchestrate.CodeInvalidInput {
			t.Errorf("%v: not refused as invalid input: %+v", tc.args, r)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.Error.Message, w) {
				t.Errorf("%v: the error %q lacks %q", tc.args, r.Error.Message, w)
			}
		}
		if r.Metadata.ModelCalls != 0 {
			t.Errorf("%v: the refused request called the model %d times", tc.args, r.Metadata.ModelCalls)
		}
		if id, ok := tc.args["request_id"]; ok && r.RequestID != id {
			t.Errorf("%v: the refused request's request_id is %q", tc.args, r.RequestID)
		}
	}

	// The planner chose the agent: auto, though the plan says manual.
	_, env := runPlan(t, cs, map[string]any{"prompt": "count things"})
	if len(env.Artifact.Steps) != 1 {
		t.Fatalf("the planned run: %+v", env.Artifact)
	}
	if got := agentOutput(t, env.Artifact.Steps[0]).Metadata.RoutingMode; got != agents.RoutingAuto {
		t.Errorf("the planner's choice is %q, want auto", got)
	}
	// Another agent chose it: auto; the router itself, named by the plan, manual.
	_, env = runPlan(t, cs, plan(map[string]any{"id": "r", "tool": "agent__router", "arguments": map[string]any{"user_query": "route"}}))
	ro := agentOutput(t, env.Artifact.Steps[0])
	if ro.Metadata.RoutingMode != agents.RoutingManual || !slices.Equal(ro.Metadata.Tools, []string{"agent__helper"}) {
		t.Errorf("the router: routing_mode %q, tools %v; want manual, [agent__helper]", ro.Metadata.RoutingMode, ro.Metadata.Tools)
	}
	mu.Lock()
	saw := strings.Join(routerSaw, "\n")
	mu.Unlock()
	if !strings.Contains(saw, `"routing_mode":"auto"`) {
		t.Errorf("the helper the router called did not answer auto: %s", saw)
	}
}
