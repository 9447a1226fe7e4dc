package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// The breaks of the request budget tree, replayed: each used to pass one
// request's limits by nesting (loops of agents, agents calling agents, an
// agent's nested plan) or to hold what its limits did not count.

// lastToolResult returns the newest tool message of a model request, if
// its last message is one: what the call the model made last came to.
func lastToolResult(r *fakeopenai.Request) (string, bool) {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
		return string(r.Messages[n-1].Content), true
	}
	return "", false
}

// TestLoopOfAgentsSharesTheToolCalls: a for_each over 64 agent steps,
// each agent calling a real downstream tool eight times, made 512
// downstream calls from one request under limits.max_tool_calls 100. The
// agents' calls are the request's: the steps and the downstream calls
// together stay within 100, the agents that find none left answer without
// tools, and the run says which limit it reached.
func TestLoopOfAgentsSharesTheToolCalls(t *testing.T) {
	var ran, agentRuns atomic.Int64 // downstream calls that ran, as the model was told; agents that started
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if res, ok := lastToolResult(r); ok && !strings.HasPrefix(res, "error") {
			ran.Add(1)
		}
		if len(r.ToolResults()) == 0 {
			agentRuns.Add(1)
		}
		if len(r.ToolResults()) < 8 && len(r.Tools) > 0 {
			return fakeopenai.Call("ev__echo", `{"message": "hi"}`)
		}
		return fakeopenai.Text("done")
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"reader": {Description: "Echoes.", Instructions: "You are reader.", Tools: []string{"ev__echo"}, MaxToolSteps: 8},
	}, func(c *config.Config) {
		c.MCPServers["ev"] = npmServer(t, "server-everything")
		c.Limits.MaxToolCalls = 100
		c.Limits.MaxAgentRuns = 64    // the loop may start its 64 agents:
		c.Limits.MaxModelCalls = 1000 // the tool calls are what is tested
	})
	items := make([]any, 64)
	for i := range items {
		items[i] = i
	}
	_, env := runPlan(t, cs, map[string]any{"bindings": map[string]any{"items": items}, "plan": map[string]any{"steps": []any{
		map[string]any{"id": "reads", "for_each": "$bindings.items", "merge": "all_settled", "do": map[string]any{"agent": "reader", "prompt": "read"}},
	}}})
	agentSteps := int(agentRuns.Load()) // each started with one of the request's tool calls
	total := int(ran.Load()) + agentSteps
	t.Logf("%d agent steps and %d downstream calls ran", agentSteps, ran.Load())
	if total > 100 {
		t.Errorf("the request made %d tool calls (%d agent steps, %d downstream calls) under limits.max_tool_calls 100", total, agentSteps, ran.Load())
	}
	if !strings.Contains(string(env.JSON()), "limits.max_tool_calls") {
		t.Errorf("nothing in the envelope names limits.max_tool_calls:\n%s", env.JSON())
	}
	servertest.StillServes(t, cs)
}

// TestAgentRecursionSharesModelCallsAndAgentRuns: an agent that calls
// itself eight times (one level under the other, to max_depth) made 657
// model calls and 73 agent runs from one agent step. Every agent run and
// model call under the request counts against its limits.max_agent_runs
// and limits.max_model_calls (the defaults, 32 and 128).
func TestAgentRecursionSharesModelCallsAndAgentRuns(t *testing.T) {
	var calls, runs atomic.Int64
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		calls.Add(1)
		if len(r.ToolResults()) == 0 {
			runs.Add(1) // an agent's first turn
		}
		if len(r.ToolResults()) < 8 && len(r.Tools) > 0 {
			return fakeopenai.Call("agent__fan", `{"user_query": "deeper"}`)
		}
		return fakeopenai.Text("done")
	})
	_, cs := agentsApp(t, fake.URL(), t.TempDir(), map[string]agents.Config{
		"fan": {Description: "Fans out.", Instructions: "You are fan.", Tools: []string{"agent__fan"}, MaxToolSteps: 8},
	}, nil)
	lim := orchestrate.DefaultLimits()
	_, env := runPlan(t, cs, plan(map[string]any{"id": "f", "agent": "fan", "prompt": "start"}))
	t.Logf("%d model calls, %d agent runs; status %s", calls.Load(), runs.Load(), env.Artifact.Status)
	if n := calls.Load(); n > int64(lim.MaxModelCalls) {
		t.Errorf("one agent step made %d model calls; limits.max_model_calls is %d", n, lim.MaxModelCalls)
	}
	if n := runs.Load(); n > int64(lim.MaxAgentRuns) {
		t.Errorf("one agent step made %d agent runs; limits.max_agent_runs is %d", n, lim.MaxAgentRuns)
	}
	if data := string(env.JSON()); !strings.Contains(data, "the request reached its limit of") ||
		(!strings.Contains(data, "limits.max_agent_runs") && !strings.Contains(data, "limits.max_model_calls")) {
		t.Errorf("nothing in the envelope says the request reached limits.max_agent_runs or limits.max_model_calls:\n%s", data)
	}
	servertest.StillServes(t, cs)
}

// TestAgentNestedPlanCallsOnlyItsTools: an agent whose tools are
// json_query and agent_orchestrate ran a nested plan that called a
// secret-returning tool and a side-effecting one. Its nested plans can
// call only its tools: those are refused at plan time (unknown_tool) and
// never called, a plan of its own tools runs, and the planner of a nested
// prompt is offered only them.
func TestAgentNestedPlanCallsOnlyItsTools(t *testing.T) {
	secret, effect := &probe{}, &probe{}
	nested := map[string]string{
		"forbidden": `{"plan": {"steps": [{"tool": "secret", "arguments": {"label": "x"}}, {"tool": "side_effect", "arguments": {"label": "y"}}]}}`,
		"allowed":   `{"plan": {"steps": [{"tool": "json_query", "arguments": {"query": ".n", "input": {"n": 7}}}]}}`,
		"prompt":    `{"prompt": "read the secret"}`,
	}
	var mu sync.Mutex
	var planningTools []string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.Tools) == 1 && r.Tools[0].Function.Name == "__planning__" {
			mu.Lock()
			data, _ := json.Marshal(r.Tools[0])
			planningTools = append(planningTools, string(data))
			mu.Unlock()
			return fakeopenai.Text("no plan")
		}
		if len(r.ToolResults()) > 0 {
			return fakeopenai.Text("done: " + r.ToolResults()[0])
		}
		for name, args := range nested {
			if strings.Contains(r.User(), name) {
				return fakeopenai.Call("agent_orchestrate", args)
			}
		}
		return fakeopenai.Text("?")
	})
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake-model", BaseURL: fake.URL(), MaxRetries: -1}}
	cfg.Agents = map[string]agents.Config{
		"narrow": {Description: "Queries JSON.", Instructions: "You are narrow.", Tools: []string{"json_query", "agent_orchestrate"}},
	}
	app := newApp(t, cfg, secret.tool(t, "secret"), effect.tool(t, "side_effect"))
	cs := connectInMemory(t, app, v20251125)
	for _, name := range []string{"forbidden", "allowed", "prompt"} {
		_, env := servertest.Call(t, cs, plan(map[string]any{"id": "n", "agent": "narrow", "prompt": name}), nil)
		out, _ := json.Marshal(env.Artifact.Steps[0].Output)
		t.Logf("%s: %s", name, out)
		switch name {
		case "forbidden":
			if !strings.Contains(string(out), "unknown_tool") {
				t.Errorf("the nested plan calling secret and side_effect was not refused with unknown_tool: %s", out)
			}
		case "allowed":
			if !strings.Contains(string(out), `\"result\":7`) && !strings.Contains(string(out), `"result":7`) {
				t.Errorf("the nested plan of json_query did not run: %s", out)
			}
		}
	}
	if n := secret.calls.Load() + effect.calls.Load(); n != 0 {
		t.Errorf("the secret and side-effecting tools were called %d times from the agent's nested plans", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(planningTools) == 0 {
		t.Fatal("the nested prompt was not planned")
	}
	for _, p := range planningTools {
		if strings.Contains(p, "secret") || strings.Contains(p, "side_effect") || !strings.Contains(p, "json_query") {
			t.Errorf("the nested prompt's planner was offered tools the agent may not call: %s", p)
		}
	}
}

// TestSkippedLoopsHoldLittle: 64 concurrent 1 KB plans of three nested
// 64×64 loops whose bodies a condition skips built 168–265 MB of responses
// and records (3.7 MB an envelope, 7.5 MB a full response) and pushed the
// server past 2 GB (under "full" it died under a 4 GiB cap). A skipped
// iteration is neither copied nor recorded (the loop's record counts it):
// a full response holds the 192 outer iterations that ran (375 KB), a
// compact one less, and the 64 plans, client and transport included,
// allocate well under a GiB in all (the engine alone allocated 25 MiB
// a plan before, and the 64 plans did not finish within their 5-minute
// timeout).
func TestSkippedLoopsHoldLittle(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.PlansPerOwner = cfg.Limits.MaxConcurrentPlans // one client sends all 64: memory, not fairness, is tested
	app := newApp(t, cfg)
	cs := connectInMemory(t, app, v20251125)
	items := "[" + strings.TrimSuffix(strings.Repeat("0,", 64), ",") + "]"
	loop := func(id string) string {
		return `{"id":"` + id + `","for_each":"$l.output.result","as":"x","do":{"for_each":"$l.output.result","as":"y","do":{"tool":"render","when":"$bindings.no","arguments":{"template":"never"}}}}`
	}
	req := func(response string) map[string]any {
		var m map[string]any
		doc := `{"response":"` + response + `","bindings":{"no":false},"plan":{"steps":[{"id":"l","tool":"json_query","arguments":{"query":".","input":` + items + `}},` + loop("a") + `,` + loop("b") + `,` + loop("c") + `]}}`
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var before, after runtimeMem
	before.read()
	var wg sync.WaitGroup
	var mu sync.Mutex
	largest := 0
	// The race detector slows each plan ten-fold: 16 at once keep the
	// test's time and still share the server.
	plans := 64
	if raceEnabled {
		plans = 16
	}
	for i := range plans {
		response := orchestrate.ResponseCompact
		if i%2 == 1 {
			response = orchestrate.ResponseFull
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // only a bound on a hang
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: req(response)})
			if err != nil {
				t.Errorf("plan %d: %v", i, err)
				return
			}
			data, _ := json.Marshal(res)
			mu.Lock()
			largest = max(largest, len(data))
			mu.Unlock()
			if res.IsError {
				t.Errorf("plan %d failed: %s", i, servertest.Text(res))
			}
		})
	}
	wg.Wait()
	after.read()
	t.Logf("largest response %d bytes; the %d plans allocated %d MiB", largest, plans, (after.total-before.total)>>20)
	if largest > 512<<10 {
		t.Errorf("a response of skipped loops is %d bytes", largest)
	}
	if grown := after.total - before.total; grown > 1<<30 {
		t.Errorf("%d plans of skipped loops allocated %d MiB", plans, grown>>20)
	}
	servertest.StillServes(t, cs)
}

// TestOneCallerCannotHoldEverySlot: one token filled all 64 plan slots
// with ask_user prompts left unanswered, and every other caller got busy
// for the plans' 5-minute timeout. A caller holds its share of the slots,
// more only while others' stay free: another token's plan still runs.
func TestOneCallerCannotHoldEverySlot(t *testing.T) {
	cfg := tenantConfig(t)
	cfg.Tenants = nil
	cfg.Limits.MaxConcurrentPlans = 4
	cfg.Limits.PlansPerOwner, cfg.Limits.PlansPerTenant = 1, 2
	cfg.Limits.QueueTimeout = 50 * time.Millisecond
	app := newApp(t, cfg, (&probe{}).tool(t, "work"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	asked := make(chan struct{}, 8)
	gone := make(chan struct{}) // the test is over: the user leaves
	hog := mcp.NewClient(&mcp.Implementation{Name: "hog"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- struct{}{}
			select { // never answers
			case <-ctx.Done():
			case <-gone:
			}
			return &mcp.ElicitResult{Action: "cancel"}, nil
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{"alice-secret-token"}}}
	alice, err := hog.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alice.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(gone)
	defer cancel()
	ask := plan(map[string]any{"tool": "ask_user", "arguments": map[string]any{"message": "approve?"}})
	results := make(chan *mcp.CallToolResult, 4)
	for range 4 {
		wg.Go(func() {
			res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: ask})
			if err == nil {
				results <- res
			}
		})
	}
	// Three of alice's plans wait for their user (4 slots less her share,
	// kept free for the others); the fourth is refused.
	for range 3 {
		select {
		case <-asked:
		case <-time.After(time.Minute): // only a bound on a hang
			t.Fatal("alice's plans did not ask their user")
		}
	}
	select {
	case <-asked:
		t.Fatal("alice holds every slot: her fourth plan asks its user too")
	case res := <-results:
		if !res.IsError || !strings.Contains(servertest.Text(res), "limits.plans_per_owner") {
			t.Fatalf("alice's fourth plan: %s; want busy naming limits.plans_per_owner", servertest.Text(res))
		}
	case <-time.After(time.Minute): // only a bound on a hang
		t.Fatal("alice's fourth plan got no answer")
	}
	bob := connectAs(t, srv, "bob-secret-token")
	if _, env := servertest.Call(t, bob, probePlan("work", "b"), nil); !env.Artifact.Success {
		t.Errorf("bob's plan while alice's wait for their user: %+v", env.Artifact)
	}
}

// TestUnansweredAskUserTimesOut: an unanswered ask_user ignored its
// step's timeout_ms (still waiting after 200 s). The elicitation waits no
// longer than the step may: the step fails with timeout, the plan answers.
func TestUnansweredAskUserTimesOut(t *testing.T) {
	app := newApp(t, config.Default())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "silent"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	cs, err := client.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	// The plan's own timeout is far longer than the step's: what ends
	// the wait must be the step's.
	args := map[string]any{"timeout_ms": 60000, "plan": map[string]any{"steps": []any{
		map[string]any{"id": "ok", "tool": "ask_user", "timeout_ms": 200, "arguments": map[string]any{"message": "approve?"}},
	}}}
	_, env := servertest.Call(t, cs, args, nil)
	e := env.Artifact.Steps[0].Error
	if e == nil || e.Code != orchestrate.CodeTimeout || !strings.Contains(e.Message, "did not answer within 200ms") {
		t.Fatalf("the unanswered ask_user step: %+v; want timeout after its timeout_ms", e)
	}
	servertest.StillServes(t, cs)
}

// runtimeMem reads the process's cumulative allocation.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}
