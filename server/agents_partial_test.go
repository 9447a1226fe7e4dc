package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// fetchTool is a test tool that answers {"label"} unless the label is
// "bad", which fails.
func fetchTool(t *testing.T) registry.Tool {
	return registry.Tool{
		Name: "fetch", Description: "Fetches a label; the label bad fails.", Source: "test",
		InputSchema: mustSchema(t, `{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			if req.Arguments["label"] == "bad" {
				return &registry.Result{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the source of bad is down"}}}, nil
			}
			return &registry.Result{Structured: map[string]any{"label": req.Arguments["label"]}}, nil
		},
	}
}

// partialApp is an app whose agents (one per name, told who they are by
// their instructions) all run on the fake at url and may call fetch.
func partialApp(t *testing.T, url string, names ...string) *mcp.ClientSession {
	t.Helper()
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: url, MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{}
	for _, n := range names {
		cfg.Agents[n] = agents.Config{Description: "Fetches.", Instructions: "You are " + n + ".", Tools: []string{"fetch"}, MaxToolSteps: 2}
	}
	app := newApp(t, cfg, fetchTool(t))
	return connectInMemory(t, app, v20251125)
}

// fetchThen is a model that calls fetch with each label in turn, one per
// turn, then answers answer.
func fetchThen(answer string, labels ...string) func(r *fakeopenai.Request) fakeopenai.Reply {
	return func(r *fakeopenai.Request) fakeopenai.Reply {
		if n := len(r.ToolResults()); n < len(labels) {
			return fakeopenai.Call("fetch", `{"label": "`+labels[n]+`"}`)
		}
		return fakeopenai.Text(answer)
	}
}

// byAgent dispatches the fake's requests to the model of the agent whose
// instructions they carry.
func byAgent(models map[string]func(r *fakeopenai.Request) fakeopenai.Reply) func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
	return func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		for n, m := range models {
			if strings.Contains(r.System(), "You are "+n+".") {
				return m(r)
			}
		}
		return fakeopenai.Text("who am I?")
	}
}

// TestAgentPartial: what an agent's partial means, and what a plan does
// with it.
//   - An agent that answers after a tool call that failed (and was not
//     made good by a later call of that tool) answers partial: result has
//     its answer, error the failed call's code; its step is partial, keeps
//     its output, the next step runs on it, and the plan ends partial.
//   - A failed call made good by a later success of the same tool leaves
//     the answer a success.
//   - Stopped by max_tool_steps with no tool results, it answers error,
//     and the step fails.
//   - Stopped by its step's timeout after a tool result, it answers
//     partial with that result and the code timeout.
func TestAgentPartial(t *testing.T) {
	fake := fakeopenai.New(t, byAgent(map[string]func(r *fakeopenai.Request) fakeopenai.Reply{
		"gapped":  fetchThen("good and (bad missing)", "good", "bad"),
		"retried": fetchThen("good after all", "bad", "good"),
		"stuck": func(r *fakeopenai.Request) fakeopenai.Reply {
			return fakeopenai.Call("fetch", `{"label": "bad"}`)
		},
	}))
	cs := partialApp(t, fake.URL(), "gapped", "retried", "stuck")
	render := map[string]any{"id": "report", "tool": "render", "arguments": map[string]any{"template": "report: {{.t}}", "values": map[string]any{"t": "$g.output.result.text"}}}

	t.Run("answered after a failed call", func(t *testing.T) {
		res, env := runPlan(t, cs, plan(map[string]any{"id": "g", "agent": "gapped", "prompt": "fetch"}, render))
		st := env.Artifact.Steps[0]
		if !res.IsError || env.Artifact.Status != orchestrate.StatusPartial || st.Status != orchestrate.StatusPartial || st.Error == nil || st.Error.Code != orchestrate.CodeToolError {
			t.Fatalf("plan %s, step %s, error %+v; want both partial with tool_error", env.Artifact.Status, st.Status, st.Error)
		}
		out := agentOutput(t, st)
		if out.Status != agents.StatusPartial || out.Result.Text != "good and (bad missing)" || out.Error == nil ||
			out.Error.Code != orchestrate.CodeToolError || !strings.Contains(out.Error.Message, "fetch") || !strings.Contains(out.Error.Message, "the source of bad is down") {
			t.Errorf("response %+v, error %+v", out, out.Error)
		}
		if r := env.Artifact.Steps[1]; r.Status != orchestrate.StatusSuccess || !strings.Contains(mustJSON(t, r.Output), "report: good and (bad missing)") {
			t.Errorf("the next step: %s, output %v", r.Status, r.Output)
		}
	})
	t.Run("a failed call made good", func(t *testing.T) {
		res, env := runPlan(t, cs, plan(map[string]any{"id": "g", "agent": "retried", "prompt": "fetch"}))
		out := agentOutput(t, env.Artifact.Steps[0])
		if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess || out.Status != agents.StatusSuccess || out.Error != nil {
			t.Errorf("plan %s, response %+v", env.Artifact.Status, out)
		}
	})
	t.Run("stopped without results", func(t *testing.T) {
		res, env := runPlan(t, cs, plan(map[string]any{"id": "g", "agent": "stuck", "prompt": "fetch"}, render))
		st := env.Artifact.Steps[0]
		if !res.IsError || env.Artifact.Status != orchestrate.StatusFailed || st.Status != orchestrate.StatusFailed || st.Error == nil || st.Error.Code != orchestrate.CodeMaxToolSteps {
			t.Fatalf("plan %s, step %s, error %+v; want failed with max_tool_steps", env.Artifact.Status, st.Status, st.Error)
		}
		if out := agentOutput(t, st); out.Status != agents.StatusError {
			t.Errorf("response %+v", out)
		}
		if r := env.Artifact.Steps[1]; r.Status != orchestrate.StatusSkipped {
			t.Errorf("the next step is %s, want skipped", r.Status)
		}
	})
}

// TestAgentPartialTimeout: an agent whose step's deadline passes while
// its model thinks, after a tool call brought a result, answers partial
// with that result and the code timeout.
func TestAgentPartialTimeout(t *testing.T) {
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("fetch", `{"label": "first"}`)
		}
		<-ctx.Done() // the step's deadline ends the request
		return fakeopenai.Reply{}
	})
	cs := partialApp(t, fake.URL(), "slow")
	_, env := runPlan(t, cs, plan(map[string]any{"id": "s", "agent": "slow", "prompt": "fetch", "timeout_ms": 500}))
	st := env.Artifact.Steps[0]
	if env.Artifact.Status != orchestrate.StatusPartial || st.Status != orchestrate.StatusPartial || st.Error == nil || st.Error.Code != orchestrate.CodeTimeout {
		t.Fatalf("plan %s, step %s, error %+v; want partial with timeout", env.Artifact.Status, st.Status, st.Error)
	}
	out := agentOutput(t, st)
	if out.Status != agents.StatusPartial || out.Error == nil || out.Error.Code != orchestrate.CodeTimeout ||
		!strings.Contains(out.Result.Text, "fetch") || !strings.Contains(out.Result.Text, "first") {
		t.Errorf("response %+v, error %+v", out, out.Error)
	}
}

// TestAgentPartialInGroups: a partial agent in a parallel group makes an
// all_settled (or collect) group partial with its output kept, and never
// wins a first_success race, which a complete answer wins.
func TestAgentPartialInGroups(t *testing.T) {
	fake := fakeopenai.New(t, byAgent(map[string]func(r *fakeopenai.Request) fakeopenai.Reply{
		"gapped":   fetchThen("half", "good", "bad"),
		"complete": fetchThen("whole", "good"),
	}))
	cs := partialApp(t, fake.URL(), "gapped", "complete")
	group := func(merge string) map[string]any {
		args := plan(map[string]any{"id": "g", "merge": merge, "parallel": []any{
			map[string]any{"id": "p", "agent": "gapped", "prompt": "fetch"},
			map[string]any{"id": "c", "agent": "complete", "prompt": "fetch"},
		}})
		args["response"] = "full"
		return args
	}
	for _, merge := range []string{"all_settled", "collect"} {
		t.Run(merge, func(t *testing.T) {
			_, env := runPlan(t, cs, group(merge))
			g := env.Artifact.Steps[0]
			if env.Artifact.Status != orchestrate.StatusPartial || g.Status != orchestrate.StatusPartial {
				t.Fatalf("plan %s, group %s; want partial", env.Artifact.Status, g.Status)
			}
			data := mustJSON(t, g.Output)
			if !strings.Contains(data, `"half"`) || !strings.Contains(data, `"whole"`) {
				t.Errorf("the group's output lacks an answer: %s", data)
			}
		})
	}
	t.Run("first_success", func(t *testing.T) {
		res, env := runPlan(t, cs, group("first_success"))
		g := env.Artifact.Steps[0]
		if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess || g.Status != orchestrate.StatusSuccess {
			t.Fatalf("plan %s, group %s, errors %v", env.Artifact.Status, g.Status, env.Artifact.Errors)
		}
		if data := mustJSON(t, g.Output); !strings.Contains(data, `"whole"`) {
			t.Errorf("the race was won by %s; want the complete answer", data)
		}
	})
}

// TestAgentCallsPartialAgent: an agent that calls another agent which
// answers partial reads that answer (not an error), and is partial in
// turn: its own answer lacks what the other could not get.
func TestAgentCallsPartialAgent(t *testing.T) {
	var mu sync.Mutex
	var told string
	fake := fakeopenai.New(t, byAgent(map[string]func(r *fakeopenai.Request) fakeopenai.Reply{
		"gapped": fetchThen("half", "good", "bad"),
		"boss": func(r *fakeopenai.Request) fakeopenai.Reply {
			if res := r.ToolResults(); len(res) > 0 {
				mu.Lock()
				told = res[0]
				mu.Unlock()
				return fakeopenai.Text("the boss has half")
			}
			return fakeopenai.Call("agent__gapped", `{"user_query": "fetch"}`)
		},
	}))
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{
		"gapped": {Description: "Fetches.", Instructions: "You are gapped.", Tools: []string{"fetch"}},
		"boss":   {Description: "Delegates.", Instructions: "You are boss.", Tools: []string{"agent__gapped"}},
	}
	cs := connectInMemory(t, newApp(t, cfg, fetchTool(t)), v20251125)
	_, env := runPlan(t, cs, plan(map[string]any{"id": "b", "agent": "boss", "prompt": "go"}))
	out := agentOutput(t, env.Artifact.Steps[0])
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(told, `"status":"partial"`) || !strings.Contains(told, `"half"`) || strings.HasPrefix(told, "error") {
		t.Errorf("the boss was told %s; want the partial answer", told)
	}
	if out.Status != agents.StatusPartial || out.Result.Text != "the boss has half" || out.Error == nil || out.Error.Code != orchestrate.CodeToolError ||
		!strings.Contains(out.Error.Message, "agent__gapped") {
		t.Errorf("the boss answered %+v, error %+v", out, out.Error)
	}
}
