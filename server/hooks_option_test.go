package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// TestOptionsHooks: the hooks a caller gives the app see its runs, and
// the runs its agents start, with their model turns and tool calls.
func TestOptionsHooks(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("render", `{"template": "hi"}`)
		}
		return fakeopenai.Text("done")
	})
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{"greeter": {Description: "Greets.", Tools: []string{"render"}}}
	var mu sync.Mutex
	parents := map[string]string{} // exec id -> parent exec id
	ended := map[string][]string{} // exec id -> its steps' types, as they ended
	finished := 0
	hooks := &orchestrate.Hooks{
		RunStarted: func(i orchestrate.RunStartedInfo) {
			mu.Lock()
			defer mu.Unlock()
			parents[i.Run.ExecID] = i.Run.ParentExecID
		},
		StepEnded: func(i orchestrate.StepEndedInfo) {
			mu.Lock()
			defer mu.Unlock()
			ended[i.Run.ExecID] = append(ended[i.Run.ExecID], i.Step.Type)
		},
		RunFinished: func(orchestrate.RunFinishedInfo) {
			mu.Lock()
			defer mu.Unlock()
			finished++
		},
	}
	app, err := server.New(t.Context(), cfg, server.Options{Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	req, issues := orchestrate.DecodeRequest([]byte(`{"plan": {"steps": [{"id": "g", "agent": "greeter", "prompt": "greet"}]}}`))
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	env := app.Run(t.Context(), req, "cli")
	if !env.Artifact.Success {
		t.Fatalf("the plan failed: %v", env.Artifact.Errors)
	}
	mu.Lock()
	defer mu.Unlock()
	root := env.Metadata.ExecID
	var child string
	for id, parent := range parents {
		if parent == root {
			child = id
		}
	}
	if _, ok := parents[root]; !ok || child == "" || finished != 2 {
		t.Fatalf("runs seen %v, %d finished: want the plan's and its agent's, both finished", parents, finished)
	}
	if got := ended[root]; len(got) != 1 || got[0] != "agent" {
		t.Errorf("the plan's steps ended: %v, want its agent step", got)
	}
	if got := ended[child]; len(got) != 3 || got[0] != "model" || got[1] != "tool" || got[2] != "model" {
		t.Errorf("the agent's steps ended: %v, want a model turn, a tool call, a model turn", got)
	}
}
