package server_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
)

// TestPlanAsksProgressOnlyWhenRead checks that a plan's downstream call
// carries a progress token only when something reads the step's progress:
// here the client, by sending a token of its own. Without one (and without
// debug logs or traces), the call asks for none, so nothing is routed.
func TestPlanAsksProgressOnlyWhenRead(t *testing.T) {
	_, cs := downstreamApp(t, map[string]mcpserver.ServerConfig{"fx": {Command: fixture(t)}}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {},
	})
	downstreamMeta := func(t *testing.T, token any) map[string]any {
		params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: map[string]any{"plan": map[string]any{
			"steps": []any{map[string]any{"id": "m", "tool": "fx__meta", "arguments": map[string]any{}}}}}}
		if token != nil {
			params.SetProgressToken(token)
		}
		res, env := callPlan(t, cs, params)
		if res.IsError {
			t.Fatalf("the plan failed: %v", env)
		}
		step := env["artifact"].(map[string]any)["steps"].([]any)[0].(map[string]any)
		meta, _ := step["output"].(map[string]any)["meta"].(map[string]any)
		return meta
	}
	if meta := downstreamMeta(t, nil); meta["progressToken"] != nil {
		t.Errorf("without a reader of progress the downstream call carried the progress token %v", meta["progressToken"])
	}
	if meta := downstreamMeta(t, "mine"); meta["progressToken"] == nil {
		t.Errorf("the client asked for progress, yet the downstream call carried no progress token (_meta %v)", meta)
	}
}
