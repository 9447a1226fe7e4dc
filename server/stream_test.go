package server_test

import (
	"context"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// planner.stream reaches the planner: by default the planning call of a
// provider that streams is streamed; "off" asks without streaming.
func TestPlannerStreamConfig(t *testing.T) {
	for _, tc := range []struct {
		stream string
		want   bool
	}{{"", true}, {"off", false}, {"all", true}} {
		t.Run("stream="+tc.stream, func(t *testing.T) {
			fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
				return fakeopenai.Call("__planning__", echoPlan)
			})
			t.Setenv("ORCHESTRA_TEST_KEY", "k")
			cfg := config.Default()
			cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "m", BaseURL: fake.URL(), APIKeyEnv: "ORCHESTRA_TEST_KEY"}, Stream: tc.stream}
			p := &probe{}
			app := newApp(t, cfg, p.tool(t, "echo"))
			cs := connectWith(t, app.Server, v20260728, nil)
			a, res := artifact(t, cs, map[string]any{"prompt": "echo"})
			if res.IsError {
				t.Fatalf("errors %v", a["errors"])
			}
			reqs := fake.Requests()
			if len(reqs) != 1 || reqs[0].Stream != tc.want {
				t.Errorf("%d requests, the first streamed: %v; want %v", len(reqs), len(reqs) > 0 && reqs[0].Stream, tc.want)
			}
		})
	}
}
