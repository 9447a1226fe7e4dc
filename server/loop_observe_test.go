package server_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/telemetry"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// loopPlan lists three numbers and doubles each in a loop.
func loopPlan() map[string]any {
	return map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "a", "tool": "json_query", "arguments": map[string]any{"query": "[1, 2, 3]", "input": nil}},
		map[string]any{"id": "each", "for_each": "$a.output.result", "do": map[string]any{
			"tool": "json_query", "arguments": map[string]any{"query": ". * 2", "input": "$item"}}},
	}}}
}

// Each iteration of a loop is a step with its index: progress counts its
// tool steps once the loop's array resolved (and ends at its total), the
// execution record lists it, logs carry its index, and its span is a child
// of the loop's.
func TestLoopObserved(t *testing.T) {
	app := appWithStore(t, "memory", nil)
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connectObs(t, app, progressTo(&mu, &got))
	params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: loopPlan()}
	params.SetProgressToken("tok")
	_, env := callPlan(t, cs, params)
	if env["artifact"].(map[string]any)["status"] != "success" {
		t.Fatalf("the plan failed: %v", env["artifact"])
	}
	// The loop's own notification may reach the handler after the call's
	// answer: wait for it (the bound is only against a hang).
	loopDone := func(p *mcp.ProgressNotificationParams) bool {
		return strings.Contains(p.Message, "loop each: success")
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		done := slices.ContainsFunc(got, loopDone)
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	var totals []float64
	for _, p := range got {
		if len(totals) == 0 || totals[len(totals)-1] != p.Total {
			totals = append(totals, p.Total)
		}
	}
	var last *mcp.ProgressNotificationParams
	if i := slices.IndexFunc(got, loopDone); i >= 0 {
		last = got[i]
	}
	mu.Unlock()
	// 2 tool steps (a, the body once) until the array resolves, then 4; the
	// loop's end is reported at 4 of 4.
	if last == nil {
		t.Fatalf("no progress notification says the loop ended; totals %v", totals)
	}
	if fmt.Sprint(totals) != "[2 4]" || last.Progress != 4 || last.Total != 4 {
		t.Errorf("totals %v; the loop's end at %g/%g %q", totals, last.Progress, last.Total, last.Message)
	}
	var ex struct {
		Records []server.StepSummary `json:"step_records"`
	}
	readJSON(t, cs, server.RecordURI(env["artifact_id"].(string)), &ex)
	var paths []string
	for _, r := range ex.Records {
		paths = append(paths, r.StepID+" "+r.Path)
	}
	want := "a plan.steps[0]|each plan.steps[1]|each[0] plan.steps[1].do[0]|each[1] plan.steps[1].do[1]|each[2] plan.steps[1].do[2]"
	if strings.Join(paths, "|") != want {
		t.Errorf("step records %v, want %s", paths, want)
	}

	// Spans and logs.
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(t.Context(), telemetry.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	if err != nil {
		t.Fatal(err)
	}
	var buf servertest.SyncBuffer
	app2, err := server.New(t.Context(), config.Default(), server.Options{Telemetry: tel, Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app2.Close() })
	callPlan(t, connectObs(t, app2, nil), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: loopPlan()})
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	loop := byName["step each"]
	for i := range 3 {
		it := byName[fmt.Sprintf("step each[%d]", i)]
		if it.Name == "" || it.Parent.SpanID() != loop.SpanContext.SpanID() {
			t.Errorf("iteration %d's span %q is not a child of the loop's", i, it.Name)
			continue
		}
		found := false
		for _, kv := range it.Attributes {
			found = found || kv.Key == telemetry.AttrIteration && kv.Value.AsInt64() == int64(i)
		}
		if !found {
			t.Errorf("iteration %d's span has no %s", i, telemetry.AttrIteration)
		}
	}
	iterations := map[float64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "step finished" && strings.HasPrefix(fmt.Sprint(m["step_id"]), "each[") {
			n, _ := m["iteration"].(float64)
			iterations[n] = true
		}
	}
	if len(iterations) != 3 {
		t.Errorf("the log lines of the iterations carry the indexes %v", iterations)
	}
}
