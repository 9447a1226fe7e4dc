package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// agentSampler is an MCP client's model answering an agent's sampling
// requests: the first request of each run calls the tool echo, the next
// (which carries its result) answers with what came back.
type agentSampler struct {
	mu    sync.Mutex
	asked []string // each request's messages, as JSON
}

func (s *agentSampler) record(v any) (n int, hasResult bool) {
	b, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, string(b))
	return len(s.asked), strings.Contains(string(b), "tool_result") || strings.Contains(string(b), "Result of tool call")
}

func (s *agentSampler) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

func (s *agentSampler) options(tools bool) *mcp.ClientOptions {
	if tools {
		return &mcp.ClientOptions{CreateMessageWithToolsHandler: func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			if _, done := s.record(req.Params.Messages); done {
				return &mcp.CreateMessageWithToolsResult{Model: "client-model", Role: "assistant", StopReason: "endTurn",
					Content: []mcp.Content{&mcp.TextContent{Text: "echoed hi"}}}, nil
			}
			return &mcp.CreateMessageWithToolsResult{Model: "client-model", Role: "assistant", StopReason: "toolUse",
				Content: []mcp.Content{&mcp.ToolUseContent{ID: "tu_1", Name: "echo", Input: map[string]any{"label": "hi"}}}}, nil
		}}
	}
	return &mcp.ClientOptions{CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		text := `{"tool": "echo", "arguments": {"label": "hi"}}`
		if _, done := s.record(req.Params.Messages); done {
			text = "echoed hi"
		}
		return &mcp.CreateMessageResult{Model: "client-model", Role: "assistant", Content: &mcp.TextContent{Text: text}}, nil
	}}
}

// samplingAgentApp is an app with no planner model and the exposed agent
// helper, which has no model of its own and may call echo.
func samplingAgentApp(t *testing.T, p *probe) *server.App {
	t.Helper()
	cfg := config.Default()
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Echoes.", Instructions: "You are helper.", Tools: []string{"echo"}, Expose: true}}
	return newApp(t, cfg, p.tool(t, "echo"))
}

// decodeResponse reads an agent's ExecutionResponse from a tool result.
func decodeResponse(t *testing.T, v any) agents.ExecutionResponse {
	t.Helper()
	data, _ := json.Marshal(v)
	var r agents.ExecutionResponse
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("no ExecutionResponse: %v\n%s", err, data)
	}
	return r
}

// TestAgentSamplesClientModel: an agent with no model, on a server with no
// planner model, runs on the calling client's model through MCP sampling
// (protocol 2025-11-25, with and without sampling tools): the client's
// CreateMessage handler answers its model calls, one of which calls the
// tool echo, which runs. It works in a plan step and when a client calls
// the exposed agent directly.
func TestAgentSamplesClientModel(t *testing.T) {
	for _, tools := range []bool{false, true} {
		name := "text"
		if tools {
			name = "tools"
		}
		t.Run(name, func(t *testing.T) {
			p := &probe{}
			app := samplingAgentApp(t, p)
			s := &agentSampler{}
			cs := connectWith(t, app.Server, v20251125, s.options(tools))
			checkVersion(t, cs, v20251125)

			res, env := runPlan(t, cs, plan(map[string]any{"id": "h", "agent": "helper", "prompt": "echo hi"}))
			if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
				t.Fatalf("status %s, errors %v", env.Artifact.Status, env.Artifact.Errors)
			}
			out := agentOutput(t, env.Artifact.Steps[0])
			if out.Status != agents.StatusSuccess || out.Result.Text != "echoed hi" || out.Metadata.Model != "client-model" ||
				out.Metadata.ModelCalls != 2 || out.Metadata.ToolCalls != 1 {
				t.Errorf("response %+v", out)
			}
			if p.calls.Load() != 1 {
				t.Errorf("echo ran %d times, want 1", p.calls.Load())
			}
			asked := s.requests()
			if len(asked) != 2 || !strings.Contains(asked[0], "echo hi") {
				t.Errorf("the client was asked %d times: %v", len(asked), asked)
			}

			direct, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent__helper", Arguments: map[string]any{"user_query": "echo hi", "request_id": "r1"}})
			if err != nil {
				t.Fatal(err)
			}
			d := decodeResponse(t, direct.StructuredContent)
			if direct.IsError || d.Status != agents.StatusSuccess || d.RequestID != "r1" || d.Result.Text != "echoed hi" || d.Metadata.Model != "client-model" {
				t.Errorf("direct call: isError %v, response %+v", direct.IsError, d)
			}
			if p.calls.Load() != 2 || len(s.requests()) != 4 {
				t.Errorf("after the direct call: echo ran %d times, the client was asked %d times", p.calls.Load(), len(s.requests()))
			}
		})
	}
}

// TestAgentSamplingOnInputRequests: on protocol 2026-07-28 a tool call
// samples the client only through input requests, which an agent's loop
// cannot use: the agent answers model_error at once, saying how to fix it,
// and the client is never asked.
func TestAgentSamplingOnInputRequests(t *testing.T) {
	p := &probe{}
	app := samplingAgentApp(t, p)
	s := &agentSampler{}
	cs := connectWith(t, app.Server, v20260728, s.options(false))
	checkVersion(t, cs, v20260728)
	res, env := runPlan(t, cs, plan(map[string]any{"id": "h", "agent": "helper", "prompt": "echo hi"}))
	st := env.Artifact.Steps[0]
	if !res.IsError || st.Status != orchestrate.StatusFailed || st.Error == nil || st.Error.Code != orchestrate.CodeModelError {
		t.Fatalf("step %s, error %+v; want failed with model_error", st.Status, st.Error)
	}
	out := agentOutput(t, st)
	for _, want := range []string{"input requests", "agents.helper.model", "planner"} {
		if out.Error == nil || !strings.Contains(out.Error.Message, want) {
			t.Errorf("the error %+v does not say %q", out.Error, want)
		}
	}
	if n := len(s.requests()); n != 0 || p.calls.Load() != 0 {
		t.Errorf("the client was asked %d times and echo ran %d times", n, p.calls.Load())
	}
}

// TestAgentWithoutAnyModel: no model of its own, no planner model and a
// client without sampling: the agent answers model_error naming the fix.
func TestAgentWithoutAnyModel(t *testing.T) {
	p := &probe{}
	app := samplingAgentApp(t, p)
	cs := connectWith(t, app.Server, v20251125, nil)
	res, env := runPlan(t, cs, plan(map[string]any{"id": "h", "agent": "helper", "prompt": "echo hi"}))
	st := env.Artifact.Steps[0]
	if !res.IsError || st.Error == nil || st.Error.Code != orchestrate.CodeModelError {
		t.Fatalf("step %s, error %+v; want model_error", st.Status, st.Error)
	}
	out := agentOutput(t, st)
	if out.Status != agents.StatusError || out.Error == nil ||
		!strings.Contains(out.Error.Message, "does not support sampling") || !strings.Contains(out.Error.Message, "set agents.helper.model") {
		t.Errorf("response %+v, error %+v", out, out.Error)
	}
}

// TestTenantAgentModel: an agent with no model of its own runs on the
// planner model of its caller's tenant when the tenant configures one
// (alice, tenant a), and on the global planner model for a caller whose
// tenant has none (ops, no tenant).
func TestTenantAgentModel(t *testing.T) {
	answer := func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) > 0 {
			return fakeopenai.Text("probed")
		}
		return fakeopenai.Call("a_probe", `{"label": "x"}`)
	}
	global, tenant := fakeopenai.New(t, answer), fakeopenai.New(t, answer)
	cfg := tenantConfig(t)
	cfg.Tenants["a"] = config.Tenant{Match: cfg.Tenants["a"].Match, Tools: []string{"a_*", "agent__*"},
		Planner: &llm.Config{Provider: llm.ProviderOpenAI, Model: "tenant-model", BaseURL: tenant.URL(), MaxRetries: -1}}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "global-model", BaseURL: global.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Probes.", Tools: []string{"a_probe"}}}
	pa := &probe{}
	app := newApp(t, cfg, pa.tool(t, "a_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	_, env := runPlan(t, connectAs(t, srv, "alice-secret-token"), plan(map[string]any{"id": "h", "agent": "helper", "prompt": "probe"}))
	if env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("status %s, errors %v", env.Artifact.Status, env.Artifact.Errors)
	}
	if n, g := len(tenant.Requests()), len(global.Requests()); n != 2 || g != 0 {
		t.Fatalf("tenant a's agent asked the tenant's model %d times and the global one %d times; want 2 and 0", n, g)
	}
	if m := tenant.Requests()[0].Model; m != "tenant-model" {
		t.Errorf("the tenant's model was asked for %q", m)
	}
	if pa.calls.Load() != 1 {
		t.Errorf("a_probe ran %d times", pa.calls.Load())
	}

	_, env = runPlan(t, connectAs(t, srv, "ops-secret-token"), plan(map[string]any{"id": "h", "agent": "helper", "prompt": "probe"}))
	if env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("ops: status %s, errors %v", env.Artifact.Status, env.Artifact.Errors)
	}
	if n, g := len(tenant.Requests()), len(global.Requests()); n != 2 || g != 2 {
		t.Errorf("a caller without a tenant: the tenant's model asked %d times (want 2 in all), the global one %d (want 2)", n, g)
	}
}

// TestTenantExposedAgentDirect: a tenant's caller that calls an exposed
// agent directly (not in a plan) gets the same scope as in a plan: the
// agent is offered only the tenant's tools.
func TestTenantExposedAgentDirect(t *testing.T) {
	var mu sync.Mutex
	var offered []string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		mu.Lock()
		defer mu.Unlock()
		offered = r.ToolNames()
		if len(r.ToolResults()) > 0 {
			return fakeopenai.Text("done")
		}
		return fakeopenai.Call("b_probe", `{"label": "x"}`)
	})
	cfg := tenantConfig(t)
	cfg.Tenants["a"] = config.Tenant{Match: cfg.Tenants["a"].Match, Tools: []string{"a_*", "agent__*"}}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Helps.", Tools: []string{"*_probe"}, Expose: true}}
	pa, pb := &probe{}, &probe{}
	app := newApp(t, cfg, pa.tool(t, "a_probe"), pb.tool(t, "b_probe"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	res, err := connectAs(t, srv, "alice-secret-token").CallTool(t.Context(), &mcp.CallToolParams{Name: "agent__helper", Arguments: map[string]any{"user_query": "probe"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := decodeResponse(t, res.StructuredContent); out.Status == agents.StatusError {
		t.Fatalf("response %+v, error %+v", out, out.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(offered) != 1 || offered[0] != "a_probe" || pb.calls.Load() != 0 {
		t.Errorf("the agent was offered %v and b_probe ran %d times; want only a_probe, and no b_probe", offered, pb.calls.Load())
	}
}
