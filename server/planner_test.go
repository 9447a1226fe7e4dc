package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/server"
)

const echoPlan = `{"type":"tool_calls","reasoning":"echo twice","calls":[
	{"tool_name":"echo","arguments":{"label":"one"}},
	{"tool_name":"echo","arguments":{"label":"$0.output.label"}}]}`

const badEchoPlan = `{"type":"tool_calls","calls":[{"tool_name":"echo","arguments":{"label":"$0.output.label"}}]}`

// samplingClient answers sampling requests with answers in turn, in text
// or as __planning__ tool calls, and records what it was asked.
type samplingClient struct {
	answers []string
	mu      sync.Mutex
	asked   []string // each request as JSON
}

func (s *samplingClient) next(req any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(req)
	s.asked = append(s.asked, string(b))
	return s.answers[min(len(s.asked), len(s.answers))-1]
}

func (s *samplingClient) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

func (s *samplingClient) options(tools bool) *mcp.ClientOptions {
	if tools {
		return &mcp.ClientOptions{CreateMessageWithToolsHandler: func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			var input map[string]any
			if err := json.Unmarshal([]byte(s.next(req.Params)), &input); err != nil {
				return nil, err
			}
			return &mcp.CreateMessageWithToolsResult{Model: "client-model", Role: "assistant", StopReason: "toolUse",
				Content: []mcp.Content{&mcp.ToolUseContent{ID: "tu_1", Name: "__planning__", Input: input}}}, nil
		}}
	}
	return &mcp.ClientOptions{CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Model: "client-model", Role: "assistant", Content: &mcp.TextContent{Text: "```json\n" + s.next(req.Params) + "\n```"}}, nil
	}}
}

func connectWith(t *testing.T, app interface {
	Connect(context.Context, mcp.Transport, *mcp.ServerSessionOptions) (*mcp.ServerSession, error)
}, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sampler", Version: "test"}, opts).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// artifact calls agent_orchestrate with args and returns the envelope's
// artifact.
func artifact(t *testing.T, cs *mcp.ClientSession, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Artifact map[string]any `json:"artifact"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Artifact == nil {
		t.Fatalf("no envelope in %s (%v)", b, err)
	}
	return env.Artifact, res
}

func plannerField(a map[string]any, name string) any {
	p, _ := a["planner"].(map[string]any)
	return p[name]
}

// The prompt path samples the client's own model when no planner is
// configured: through session.CreateMessage on 2025-11-25 and through
// multi round-trip input requests on 2026-07-28, with and without the
// sampling.tools capability.
func TestPromptThroughSampling(t *testing.T) {
	for _, version := range []string{v20251125, v20260728} {
		for _, tools := range []bool{true, false} {
			name := version + "/text"
			if tools {
				name = version + "/tools"
			}
			t.Run(name, func(t *testing.T) {
				p := &probe{}
				app := newApp(t, nil, p.tool(t, "echo"))
				sc := &samplingClient{answers: []string{echoPlan}}
				cs := connectWith(t, app.Server, version, sc.options(tools))
				checkVersion(t, cs, version)
				a, res := artifact(t, cs, map[string]any{"prompt": "echo one, then echo what came back"})
				if res.IsError || a["status"] != "success" {
					t.Fatalf("status %v, errors %v, validation %v", a["status"], a["errors"], a["validation_errors"])
				}
				if p.calls.Load() != 2 || plannerField(a, "model_calls") != 1.0 || plannerField(a, "attempts") != 1.0 {
					t.Errorf("%d tool calls, planner %v", p.calls.Load(), a["planner"])
				}
				asked := sc.requests()
				if len(asked) != 1 {
					t.Fatalf("%d sampling requests", len(asked))
				}
				if !strings.Contains(asked[0], "__planning__") || !strings.Contains(asked[0], "echo one, then echo") {
					t.Errorf("the sampling request lacks the planning tool or the goal: %s", asked[0])
				}
				if strings.Contains(asked[0], "agent_orchestrate") {
					t.Error("agent_orchestrate is offered to the planner")
				}
			})
		}
	}
}

// The repair loop through sampling: the second sampling request carries
// the errors of the first answer; on 2026-07-28 that takes a second input
// round, replayed from the signed request state.
func TestPromptSamplingRepair(t *testing.T) {
	for _, version := range []string{v20251125, v20260728} {
		t.Run(version, func(t *testing.T) {
			p := &probe{}
			app := newApp(t, nil, p.tool(t, "echo"))
			sc := &samplingClient{answers: []string{badEchoPlan, echoPlan}}
			cs := connectWith(t, app.Server, version, sc.options(true))
			a, res := artifact(t, cs, map[string]any{"prompt": "echo"})
			if res.IsError {
				t.Fatalf("errors %v, validation %v", a["errors"], a["validation_errors"])
			}
			asked := sc.requests()
			if len(asked) != 2 || !strings.Contains(asked[1], "self_ref") && !strings.Contains(asked[1], "forward_ref") {
				t.Fatalf("sampling requests: %v", asked)
			}
			if plannerField(a, "model_calls") != 2.0 || plannerField(a, "attempts") != 2.0 || p.calls.Load() != 2 {
				t.Errorf("planner %v, %d tool calls", a["planner"], p.calls.Load())
			}
		})
	}
}

// Without a configured planner and without sampling, the error says what
// to configure; the run goes planner_active → failed.
func TestPromptWithoutPlanner(t *testing.T) {
	for _, version := range []string{v20251125, v20260728} {
		t.Run(version, func(t *testing.T) {
			app := newApp(t, nil)
			cs := connectWith(t, app.Server, version, nil)
			a, res := artifact(t, cs, map[string]any{"prompt": "anything"})
			if !res.IsError || a["status"] != "failed" {
				t.Fatalf("isError %v, status %v", res.IsError, a["status"])
			}
			msg, _ := json.Marshal(a["errors"])
			for _, want := range []string{"planner_failed", "does not support sampling", "planner:", "provider: openai", "OPENAI_API_KEY"} {
				if !strings.Contains(string(msg), want) {
					t.Errorf("the error does not say %q: %s", want, msg)
				}
			}
		})
	}
}

// A configured planner is used even when the client could sample.
func TestPromptConfiguredPlanner(t *testing.T) {
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
	sc := &samplingClient{answers: []string{echoPlan}}
	cs := connectWith(t, app.Server, v20260728, sc.options(true))
	a, res := artifact(t, cs, map[string]any{"prompt": "echo"})
	if res.IsError || len(sc.requests()) != 0 {
		t.Fatalf("isError %v, %d sampling requests, errors %v", res.IsError, len(sc.requests()), a["errors"])
	}
	if plannerField(a, "input_tokens") != 321.0 || plannerField(a, "model_calls") != 1.0 {
		t.Errorf("planner %v", a["planner"])
	}
}

// A planner block that cannot work stops the server from starting.
func TestPlannerMisconfigured(t *testing.T) {
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderAnthropic, Model: "claude-test", APIKeyEnv: "ORCHESTRA_TEST_NO_SUCH_KEY"}}
	if _, err := newAppErr(t, cfg); err == nil || !strings.Contains(err.Error(), "ORCHESTRA_TEST_NO_SUCH_KEY") {
		t.Errorf("err = %v", err)
	}
}

func newAppErr(t *testing.T, cfg *config.Config) (*server.App, error) {
	app, err := server.New(t.Context(), cfg, server.Options{Version: "test"})
	if app != nil {
		t.Cleanup(func() { app.Close() })
	}
	return app, err
}
