package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/telemetry"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// TestAgentsSpansAndProgress: an agent run's span nests under its step's,
// and the step's progress reports the agent's tool calls.
func TestAgentsSpansAndProgress(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(t.Context(), telemetry.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("render", `{"template": "hi"}`)
		}
		return fakeopenai.Text("done")
	})
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"greeter": {Description: "Greets.", Tools: []string{"render"}}}
	app, err := server.New(t.Context(), cfg, server.Options{Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connectObs(t, app, progressTo(&mu, &got))
	params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: plan(map[string]any{"id": "g", "agent": "greeter", "prompt": "greet"})}
	params.SetProgressToken("tok")
	_, env := callPlan(t, cs, params)
	if a := env["artifact"].(map[string]any); a["status"] != "success" {
		t.Fatalf("the plan failed: %v", a["errors"])
	}

	var step, child tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "step g" {
			step = s
		}
		for _, kv := range s.Attributes {
			if s.Name == "orchestrate" && kv.Value.AsString() == "agent__greeter" {
				child = s
			}
		}
	}
	if step.Name == "" || child.Name == "" {
		t.Fatalf("spans %v: want step g and the agent's orchestrate span", names(exp.GetSpans()))
	}
	if child.Parent.SpanID() != step.SpanContext.SpanID() || child.SpanContext.TraceID() != step.SpanContext.TraceID() {
		t.Errorf("the agent's span is not a child of its step's span")
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := cs.Ping(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		found := false
		for _, p := range got {
			found = found || strings.Contains(p.Message, "agent greeter: calling render")
		}
		mu.Unlock()
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress notification reported the agent's tool call")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
