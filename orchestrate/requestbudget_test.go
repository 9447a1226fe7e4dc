package orchestrate

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// A run draws from the budget its context carries: nested in an agent's
// or a plan's work, it can only divide what its request may spend, and
// call only what its caller could.

// countingCatalog has echo, which counts its calls, and a fake agent tool.
func countingCatalog(t *testing.T, calls *atomic.Int64) *registry.Catalog {
	echo := func(name string) registry.Tool {
		return fakeTool(t, name, "", "", func(context.Context, map[string]any) (*registry.Result, error) {
			calls.Add(1)
			return structured(map[string]any{"ok": true}), nil
		})
	}
	return registry.NewCatalog(echo("echo"), echo("secret"), echo(AgentToolPrefix+"helper"))
}

// TestNestedRunsShareTheRequestsToolCalls: runs nested under one request
// (as an agent's calls are) together make no more tool calls than the
// request may, however many runs there are.
func TestNestedRunsShareTheRequestsToolCalls(t *testing.T) {
	var calls atomic.Int64
	te := newTestEngine(t, countingCatalog(t, &calls), Limits{MaxToolCalls: 10})
	ctx := te.Budgeted(t.Context(), nil)
	limited := 0
	for range 8 {
		env := te.Run(ctx, mustRequest(t, `{"plan":{"steps":[{"tool":"echo","arguments":{}},{"tool":"echo","arguments":{}}]}}`))
		for _, e := range env.Artifact.Errors {
			if e.Code == CodeLimitExceeded && strings.Contains(e.Message, "the request reached its limit of 10 tool calls (limits.max_tool_calls)") {
				limited++
			}
		}
	}
	if n := calls.Load(); n != 10 {
		t.Errorf("8 runs of 2 calls under one request of 10 made %d calls", n)
	}
	if limited == 0 {
		t.Error("no run said the request reached limits.max_tool_calls")
	}
}

// TestLoopCountsAgentRuns: a loop whose iterations would start more agent
// runs than the request has left fails as its array resolves, before any
// iteration, naming limits.max_agent_runs.
func TestLoopCountsAgentRuns(t *testing.T) {
	var calls atomic.Int64
	te := newTestEngine(t, countingCatalog(t, &calls), Limits{MaxAgentRuns: 3})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"l","tool":"echo","arguments":{}},
		{"id":"r","for_each":["a","b","c","d"],"do":{"tool":"agent__helper","arguments":{}}}]}}`))
	e := stepError(env, "r")
	if e == nil || e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "limits.max_agent_runs") || calls.Load() != 1 {
		t.Errorf("loop error %+v after %d calls; want limit_exceeded naming limits.max_agent_runs before any iteration", e, calls.Load())
	}
}

// TestIterationRecordsAreBytesHeld: the records of a loop's iterations
// count against the request's bytes: a loop that would build more than
// its request may hold fails with too_large, and its run gives back what
// it held.
func TestIterationRecordsAreBytesHeld(t *testing.T) {
	var calls atomic.Int64
	te := newTestEngine(t, countingCatalog(t, &calls), Limits{MaxRunBytes: 8 * recordBytes})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"r","for_each":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"max_concurrency":1,"do":{"tool":"echo","arguments":{}}}]}}`))
	e := stepError(env, "r")
	if e == nil || e.Code != CodeTooLarge || !strings.Contains(e.Message, "limits.max_run_bytes") {
		t.Fatalf("loop error %+v; want too_large naming limits.max_run_bytes", e)
	}
	if n := calls.Load(); n >= 16 {
		t.Errorf("every iteration ran (%d calls)", n)
	}
	if held := te.MemoryHeld(); held != 0 {
		t.Errorf("the run ended and the server still counts %d bytes", held)
	}
}

// TestNestedRunCallsOnlyWhatItsCallerCould: a run under a budget that
// allows only some tools (an agent's) refuses the others at plan time;
// they are never called.
func TestNestedRunCallsOnlyWhatItsCallerCould(t *testing.T) {
	var calls atomic.Int64
	te := newTestEngine(t, countingCatalog(t, &calls), Limits{})
	agent := budget.New("agent narrow", budget.Grant{Root: true, Tools: func(name string) bool { return name == "echo" }})
	ctx := toolcontext.WithBudget(t.Context(), agent.Child("the run", budget.Grant{}))
	env := te.Run(ctx, mustRequest(t, `{"plan":{"steps":[{"tool":"secret","arguments":{}}]}}`))
	if len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != CodeUnknownTool || calls.Load() != 0 {
		t.Fatalf("a nested plan calling a tool its caller may not: %s", env.JSON())
	}
	if env := te.Run(ctx, mustRequest(t, `{"plan":{"steps":[{"tool":"echo","arguments":{}}]}}`)); !env.Artifact.Success {
		t.Errorf("a nested plan of its caller's tools: %s", env.JSON())
	}
}

// TestHandlerReleasesWhatItsRequestHeld: the bytes a request's runs held
// are the server's again once its handler has answered, whatever nested
// in it.
func TestHandlerReleasesWhatItsRequestHeld(t *testing.T) {
	te := newTestEngine(t, budgetCatalog(t, new(int)), Limits{})
	h := te.Handler(HandlerOptions{})
	for _, plan := range []string{
		`{"plan":{"steps":[{"id":"a","tool":"big","arguments":{"n":100000}},{"id":"r","for_each":[1,2,3],"do":{"tool":"sink","arguments":{"x":"$a.output.text"}}}]}}`,
		`{"plan":{"steps":[{"tool":"nope","arguments":{}}]}}`,
	} {
		res, err := h(t.Context(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolName, Arguments: json.RawMessage(plan)}})
		if err != nil || res == nil {
			t.Fatal(err)
		}
		if held := te.MemoryHeld(); held != 0 {
			t.Errorf("after %s the server still counts %d bytes", plan, held)
		}
	}
}
