package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/server/runlog"
	"github.com/orchestra-mcp/orchestra/server/secrets"
	"github.com/orchestra-mcp/orchestra/telemetry"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// jq is a json_query step.
func jq(id string, n int) map[string]any {
	return map[string]any{"id": id, "tool": "json_query", "arguments": map[string]any{"query": ".n", "input": map[string]any{"n": n}}}
}

// groupPlan has 3 top-level steps, one a parallel group of two: 4 tool
// steps and 1 group.
func groupPlan() map[string]any {
	return map[string]any{"plan": map[string]any{"steps": []any{
		jq("a", 1),
		map[string]any{"id": "g", "parallel": []any{jq("x", 2), jq("y", 3)}},
		jq("z", 4),
	}}}
}

// connectObs connects a client with options to app in memory.
func connectObs(t *testing.T, app *server.App, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "obs", Version: "test"}, copts).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callPlan(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	params = withFullResponse(params)
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	return res, env
}

// withFullResponse asks for the whole envelope, which the records keep,
// when the arguments are a map that names no response.
func withFullResponse(params *mcp.CallToolParams) *mcp.CallToolParams {
	m, ok := params.Arguments.(map[string]any)
	if !ok || params.Name != "agent_orchestrate" {
		return params
	}
	if _, named := m["response"]; named {
		return params
	}
	m = maps.Clone(m)
	m["response"] = "full"
	p := *params
	p.Arguments = m
	return &p
}

func readJSON(t *testing.T, cs *mcp.ClientSession, uri string, v any) {
	t.Helper()
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("reading %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("reading %s: %d contents", uri, len(res.Contents))
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), v); err != nil {
		t.Fatalf("reading %s: %v", uri, err)
	}
}

func appWithStore(t *testing.T, path string, cfg *config.Config) *server.App {
	t.Helper()
	if cfg == nil {
		cfg = config.Default()
	}
	app, err := server.New(t.Context(), cfg, server.Options{Store: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return app
}

// TestRecordResource runs a plan and reads its record back through
// orchestra://executions/{exec_id}: the same envelope, and a record per
// step; then it reads the list a page at a time.
func TestRecordResource(t *testing.T) {
	app := appWithStore(t, "memory", nil)
	cs := connectObs(t, app, nil)
	var ids []string
	for range 3 {
		_, env := callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: groupPlan()})
		meta := env["_metadata"].(map[string]any)
		id := env["artifact_id"].(string)
		if meta["record"] != server.RecordURI(id) {
			t.Fatalf("_metadata.record = %v, want %s", meta["record"], server.RecordURI(id))
		}
		var ex struct {
			Status   string           `json:"status"`
			Envelope map[string]any   `json:"envelope"`
			Records  []map[string]any `json:"step_records"`
		}
		readJSON(t, cs, server.RecordURI(id), &ex)
		if got, want := mustJSON(t, ex.Envelope), mustJSON(t, env); got != want {
			t.Fatalf("the record's envelope differs from the result:\nrecord: %s\nresult: %s", got, want)
		}
		if ex.Status != "success" || len(ex.Records) != 5 {
			t.Fatalf("record status %s with %d step records, want success with 5", ex.Status, len(ex.Records))
		}
		for _, r := range ex.Records {
			if r["status"] != "success" {
				t.Errorf("step %v is %v in the record", r["step_id"], r["status"])
			}
		}
		ids = append(ids, id)
	}
	// Newest first, two a page.
	var got []string
	uri := server.ExecutionsURI + "?limit=2"
	for uri != "" {
		var page server.ExecutionPage
		readJSON(t, cs, uri, &page)
		for _, e := range page.Executions {
			got = append(got, e.ExecID)
		}
		uri = page.Next
	}
	want := []string{ids[2], ids[1], ids[0]}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pages listed %v, want %v", got, want)
	}
	var first server.ExecutionPage
	readJSON(t, cs, server.ExecutionsURI, &first)
	if len(first.Executions) != 3 || first.Next != "" {
		t.Fatalf("orchestra://executions listed %d runs, next %q", len(first.Executions), first.Next)
	}
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.RecordURI("nope")}); err == nil {
		t.Fatal("reading an unknown record succeeded")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRecordsSurviveRestart runs plans with a database on disk, closes the
// app, and reads them from a new one; retention then keeps the newest runs.
func TestRecordsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orchestra.db")
	app := appWithStore(t, path, nil)
	cs := connectObs(t, app, nil)
	var envs []map[string]any
	for range 4 {
		_, env := callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: groupPlan()})
		envs = append(envs, env)
	}
	cs.Close()
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.Store.Retention.MaxRuns = 2
	app2 := appWithStore(t, path, cfg)
	cs2 := connectObs(t, app2, nil)
	var page server.ExecutionPage
	readJSON(t, cs2, server.ExecutionsURI, &page)
	if len(page.Executions) != 2 {
		t.Fatalf("after a restart with max_runs 2, %d runs are listed", len(page.Executions))
	}
	for i, e := range page.Executions {
		env := envs[3-i]
		if e.ExecID != env["artifact_id"] {
			t.Fatalf("run %d is %s, want %s", i, e.ExecID, env["artifact_id"])
		}
		var ex struct {
			Envelope map[string]any `json:"envelope"`
		}
		readJSON(t, cs2, e.URI, &ex)
		if mustJSON(t, ex.Envelope) != mustJSON(t, env) {
			t.Fatalf("run %s's envelope changed across the restart", e.ExecID)
		}
	}
}

// TestConcurrentRecords runs plans at once and checks every record holds
// its own run.
func TestConcurrentRecords(t *testing.T) {
	app := appWithStore(t, filepath.Join(t.TempDir(), "orchestra.db"), nil)
	cs := connectObs(t, app, nil)
	const n = 8
	var wg sync.WaitGroup
	envs := make([]map[string]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := map[string]any{"plan": map[string]any{"steps": []any{jq("only", i)}}}
			res, err := cs.CallTool(t.Context(), withFullResponse(&mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args}))
			if err != nil {
				t.Error(err)
				return
			}
			data, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(data, &envs[i])
		}()
	}
	wg.Wait()
	for i, env := range envs {
		if env == nil {
			t.Fatalf("run %d returned nothing", i)
		}
		var ex struct {
			Envelope map[string]any   `json:"envelope"`
			Records  []map[string]any `json:"step_records"`
		}
		readJSON(t, cs, server.RecordURI(env["artifact_id"].(string)), &ex)
		if mustJSON(t, ex.Envelope) != mustJSON(t, env) {
			t.Errorf("run %d: the record's envelope is not its own", i)
		}
		if len(ex.Records) != 1 || fmt.Sprint(ex.Records[0]["output"].(map[string]any)["result"]) != fmt.Sprint(i) {
			t.Errorf("run %d: step records %v", i, ex.Records)
		}
	}
}

// progressTo returns client options that append the progress
// notifications the client receives to got, under mu.
func progressTo(mu *sync.Mutex, got *[]*mcp.ProgressNotificationParams) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			*got = append(*got, req.Params)
			mu.Unlock()
		},
	}
}

// TestProgress counts the progress notifications of a plan with a parallel
// group: one when each tool step or group starts and one when it ends,
// 2 × (4 tool steps + 1 group) = 10, with progress never going backwards
// and ending at the number of tool steps.
func TestProgress(t *testing.T) {
	app := appWithStore(t, "memory", nil)
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connectObs(t, app, progressTo(&mu, &got))
	params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: groupPlan()}
	params.SetProgressToken("tok")
	callPlan(t, cs, params)
	const want = 10
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A round trip after the last notification was written: anything more
	// would have arrived by now.
	if err := cs.Ping(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != want {
		for _, p := range got {
			t.Logf("%g/%g %s", p.Progress, p.Total, p.Message)
		}
		t.Fatalf("%d progress notifications, want %d", len(got), want)
	}
	last := 0.0
	for _, p := range got {
		if p.Progress < last {
			t.Errorf("progress went back from %g to %g (%s)", last, p.Progress, p.Message)
		}
		last = p.Progress
		if p.Total != 4 || p.ProgressToken != "tok" {
			t.Errorf("notification %+v: want total 4 and token tok", p)
		}
	}
	if last != 4 {
		t.Errorf("the last progress is %g, want 4", last)
	}
	if m := got[len(got)-1].Message; !strings.Contains(m, "step z (json_query): success in") {
		t.Errorf("the last message is %q", m)
	}
}

// TestSpans checks the spans of a run that calls the fixture server's meta
// tool, in memory: orchestrate (child of the caller's traceparent) → step
// → tools/call; the downstream server receives the caller's trace id and
// the step span as parent; and the run is counted in the metrics.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := telemetry.New(t.Context(), telemetry.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"fx": {Command: fixture(t)}}
	app, err := server.New(t.Context(), cfg, server.Options{Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectObs(t, app, nil)

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "m", "tool": "fx__meta", "arguments": map[string]any{}},
	}}}}
	params.Meta = mcp.Meta{"traceparent": "00-" + traceID + "-" + callerSpan + "-01"}
	_, env := callPlan(t, cs, params)
	a := env["artifact"].(map[string]any)
	if a["status"] != "success" {
		t.Fatalf("the plan failed: %v", a["errors"])
	}
	out := a["steps"].([]any)[0].(map[string]any)["output"].(map[string]any)
	sent, _ := out["meta"].(map[string]any)["traceparent"].(string)

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	run, step, call := byName["orchestrate"], byName["step m"], byName["tools/call fx__meta"]
	if run.Name == "" || step.Name == "" || call.Name == "" {
		t.Fatalf("spans %v: want orchestrate, step m and tools/call fx__meta", names(spans))
	}
	if run.SpanContext.TraceID().String() != traceID || run.Parent.SpanID().String() != callerSpan || !run.Parent.IsRemote() {
		t.Errorf("orchestrate span: trace %s parent %s, want the caller's %s/%s", run.SpanContext.TraceID(), run.Parent.SpanID(), traceID, callerSpan)
	}
	if step.Parent.SpanID() != run.SpanContext.SpanID() || call.Parent.SpanID() != step.SpanContext.SpanID() {
		t.Errorf("parents: step's %s (want %s), call's %s (want %s)", step.Parent.SpanID(), run.SpanContext.SpanID(), call.Parent.SpanID(), step.SpanContext.SpanID())
	}
	if want := "00-" + traceID + "-" + step.SpanContext.SpanID().String() + "-01"; sent != want {
		t.Errorf("the downstream server got traceparent %q, want the step span's %q", sent, want)
	}
	attrs := map[string]string{}
	for _, kv := range append(run.Attributes, step.Attributes...) {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{"orchestra.exec_id": env["artifact_id"].(string), "orchestra.status": "success", "orchestra.step.id": "m", "gen_ai.tool.name": "fx__meta"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
		}
	}
	for _, name := range []string{"orchestra.orchestrations", "orchestra.steps", "orchestra.step.duration", "orchestra.plan.duration"} {
		if !seen[name] {
			t.Errorf("no metric %s in %v", name, seen)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestRunLogs checks that every log line about a run or a step carries
// request_id, exec_id, step_id and tool, and that no secret of the
// configuration — a downstream server's env value and header, a bearer
// token — appears in any line, even when a tool's error repeats them.
func TestRunLogs(t *testing.T) {
	const envSecret, headerSecret, bearerSecret = "env-secret-value-1234", "header-secret-5678", "bearer-secret-9012"
	t.Setenv("ORCHESTRA_TEST_TOKENS", bearerSecret)
	cfg := config.Default()
	cfg.Server.Auth.TokensEnv = "ORCHESTRA_TEST_TOKENS"
	cfg.MCPServers = map[string]mcpserver.ServerConfig{
		"fx":  {Command: fixture(t), Env: map[string]string{"FIXTURE_SECRET": envSecret}},
		"web": {URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, Disabled: true},
	}
	var buf servertest.SyncBuffer
	log := slog.New(secrets.NewHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), secrets.Of(cfg)))
	app, err := server.New(t.Context(), cfg, server.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectObs(t, app, nil)
	args := map[string]any{"plan": map[string]any{"steps": []any{
		jq("a", 1),
		map[string]any{"id": "leak", "tool": "fx__fail", "arguments": map[string]any{"message": "token " + bearerSecret + " env " + envSecret + " Authorization: Bearer " + headerSecret}},
	}}}
	_, env := callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
	log.Info("config", "headers", cfg.MCPServers["web"].Headers, "env", cfg.MCPServers["fx"].Env, "authorization", "Bearer "+bearerSecret)

	out := buf.String()
	for _, s := range []string{envSecret, headerSecret, bearerSecret} {
		if strings.Contains(out, s) {
			t.Errorf("a secret appears in the logs: %q", s)
		}
	}
	if !strings.Contains(out, secrets.Redacted) {
		t.Error("nothing was redacted, though the failing step's error holds secrets")
	}
	execID := env["artifact_id"].(string)
	runLines := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %s", line)
		}
		if _, ok := m["exec_id"]; !ok {
			continue
		}
		runLines++
		for _, k := range []string{"request_id", "exec_id", "step_id", "tool"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line without %s: %s", k, line)
			}
		}
		if m["exec_id"] != execID || m["request_id"] == "" {
			t.Errorf("line with the wrong ids: %s", line)
		}
		if strings.HasPrefix(m["msg"].(string), "step") && m["step_id"] == "" {
			t.Errorf("step line without a step id: %s", line)
		}
	}
	if runLines < 5 {
		t.Fatalf("only %d lines about the run:\n%s", runLines, out)
	}
}

// TestClientLogs checks the logging notifications of a run on both
// protocols: none until the client asks for a level (the lines are not even
// built), by logging/setLevel on 2025-11-25 or in the request's _meta on
// 2026-07-28; then the run's lines at and above the level, with secrets cut
// out as in the server's log.
func TestClientLogs(t *testing.T) {
	const secret = "client-log-secret-4321"
	t.Setenv("ORCHESTRA_TEST_API_KEY", secret)
	plan := map[string]any{"plan": map[string]any{"steps": []any{
		jq("a", 1),
		map[string]any{"id": "b", "tool": "json_query", "arguments": map[string]any{"query": `"key ` + secret + `" | error`, "input": map[string]any{}}},
	}}}
	for _, version := range []string{v20251125, v20260728} {
		t.Run(version, func(t *testing.T) {
			app := appWithStore(t, "memory", nil)
			var mu sync.Mutex
			var got []*mcp.LoggingMessageParams
			st, ct := mcp.NewInMemoryTransports()
			ss, err := app.Server.Connect(t.Context(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ss.Close() })
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "obs", Version: "test"}, &mcp.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					mu.Lock()
					got = append(got, req.Params)
					mu.Unlock()
				},
			}).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			count := func() int {
				// A round trip after the last notification was written:
				// anything more would have arrived by now.
				if err := cs.Ping(t.Context(), nil); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				return len(got)
			}

			callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: plan})
			if n := count(); n != 0 {
				t.Fatalf("%d logging notifications before the client asked for a level, want none", n)
			}

			params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: plan}
			if version == v20251125 {
				if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
			} else {
				params.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
			}
			callPlan(t, cs, params)
			deadline := time.Now().Add(5 * time.Second)
			for count() < 3 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) < 3 {
				t.Fatalf("%d logging notifications after asking for level info, want the run's lines", len(got))
			}
			all, _ := json.Marshal(got)
			if strings.Contains(string(all), secret) {
				t.Errorf("a secret reached the client's log: %s", all)
			}
			for _, p := range got {
				if p.Logger != "orchestra" {
					t.Errorf("logger %q, want orchestra", p.Logger)
				}
				if p.Level == "debug" {
					t.Errorf("a debug line reached a client that asked for info: %s", p.Data)
				}
			}
		})
	}
}

// everyKindOfEnd is a plan whose steps end in every way: run at the top
// level and in groups nested two deep, failed and let go on (on_error
// continue), skipped because a step they need failed, kept from starting
// when their group failed (max_concurrency 1, a nested group among them),
// and skipped whole, groups too, when the plan halted. 12 tool steps, 17
// steps and groups in all.
func everyKindOfEnd() map[string]any {
	fail := func(id string) map[string]any {
		return map[string]any{"id": id, "tool": "json_query", "arguments": map[string]any{"query": `"no" | error`, "input": map[string]any{}}}
	}
	group := func(id string, children ...any) map[string]any {
		return map[string]any{"id": id, "parallel": children}
	}
	bad := fail("bad")
	bad["on_error"] = "continue"
	k := group("k", fail("kf"), jq("kn", 1), group("kg", jq("kgx", 2)))
	k["max_concurrency"] = 1
	return map[string]any{"plan": map[string]any{"steps": []any{
		jq("a", 1),
		group("g", jq("x", 2), group("h", jq("y", 3), jq("z", 4))),
		bad,
		map[string]any{"id": "dep", "tool": "json_query", "arguments": map[string]any{"query": ".", "input": "$bad.output.result"}},
		k,
		jq("after", 5),
		group("ag", jq("agx", 6), jq("agy", 7)),
	}}}
}

// TestEveryObserverSeesEveryStepEndOnce runs everyKindOfEnd and checks
// that each consumer of the engine's hooks accounts for every step and
// group exactly once, with the status the envelope gives it: the
// execution record, the log, the progress notifications, the metrics and
// the spans (one per step that started).
func TestEveryObserverSeesEveryStepEndOnce(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(t.Context(), telemetry.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs servertest.SyncBuffer
	app, err := server.New(t.Context(), config.Default(), server.Options{
		Store: "memory", Telemetry: tel,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	var mu sync.Mutex
	var notes []*mcp.ProgressNotificationParams
	cs := connectObs(t, app, progressTo(&mu, &notes))
	params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: everyKindOfEnd()}
	params.SetProgressToken("p")
	_, env := callPlan(t, cs, params)

	// The envelope: id → status of every step and group.
	want := map[string]string{}
	started := map[string]bool{}
	var walk func([]any)
	walk = func(steps []any) {
		for _, s := range steps {
			m := s.(map[string]any)
			id := m["id"].(string)
			want[id] = m["status"].(string)
			started[id] = m["started_at"] != nil
			if c, ok := m["children"].([]any); ok {
				walk(c)
			}
		}
	}
	walk(env["artifact"].(map[string]any)["steps"].([]any))
	wantStatus := map[string]string{
		"a": "success", "g": "success", "x": "success", "h": "success", "y": "success", "z": "success",
		"bad": "failed", "dep": "skipped", "k": "failed", "kf": "failed", "kn": "skipped", "kg": "skipped",
		"kgx": "skipped", "after": "skipped", "ag": "skipped", "agx": "skipped", "agy": "skipped",
	}
	if diff := cmp.Diff(wantStatus, want); diff != "" {
		t.Fatalf("the plan did not end as designed (-want +got):\n%s", diff)
	}
	// ended counts, per consumer, what it reported of each step's end.
	check := func(consumer string, ended map[string][]string) {
		t.Helper()
		for id, status := range want {
			if got := ended[id]; len(got) != 1 || got[0] != status {
				t.Errorf("%s: step %s ended %v, want once, %s", consumer, id, got, status)
			}
		}
		for id := range ended {
			if _, ok := want[id]; !ok {
				t.Errorf("%s: step %s is not in the envelope", consumer, id)
			}
		}
	}

	// The execution record.
	var ex struct {
		Records []struct {
			StepID string `json:"step_id"`
			Status string `json:"status"`
		} `json:"step_records"`
	}
	readJSON(t, cs, server.RecordURI(env["artifact_id"].(string)), &ex)
	recorded := map[string][]string{}
	for _, r := range ex.Records {
		recorded[r.StepID] = append(recorded[r.StepID], r.Status)
	}
	check("record", recorded)

	// The log.
	logged := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %s", line)
		}
		if msg, _ := m["msg"].(string); msg == "step finished" || msg == runlog.FailedCall(fmt.Sprint(m["tool"])) {
			logged[m["step_id"].(string)] = append(logged[m["step_id"].(string)], m["status"].(string))
		}
		if m["msg"] == "engine error" {
			t.Errorf("the engine failed inside: %s", line)
		}
	}
	check("log", logged)

	// The progress notifications: one per start, one per end.
	if err := cs.Ping(t.Context(), nil); err != nil { // the notifications sent before the result arrived
		t.Fatal(err)
	}
	mu.Lock()
	progressed := map[string][]string{}
	starts := 0
	last := 0.0
	for _, n := range notes {
		label, rest, _ := strings.Cut(n.Message, ": ")
		id := strings.Fields(label)[1]
		if rest == "started" {
			starts++
			continue
		}
		progressed[id] = append(progressed[id], strings.Fields(rest)[0])
		last = n.Progress
		if n.Total != 12 {
			t.Errorf("progress total %g, want the 12 tool steps", n.Total)
		}
	}
	mu.Unlock()
	check("progress", progressed)
	if last != 12 {
		t.Errorf("the last progress is %g, want 12: every tool step ended", last)
	}

	// The metrics: orchestra.steps counts every end, by status.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	counted := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "orchestra.steps" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				st, _ := dp.Attributes.Value(telemetry.AttrStatus)
				counted[st.AsString()] += dp.Value
			}
		}
	}
	byStatus := map[string]int64{}
	for _, st := range want {
		byStatus[st]++
	}
	if diff := cmp.Diff(byStatus, counted); diff != "" {
		t.Errorf("orchestra.steps by status (-envelope +metric):\n%s", diff)
	}

	// The spans: one per step that started, each ended once.
	spans := map[string][]string{}
	for _, s := range exp.GetSpans() {
		if id, ok := strings.CutPrefix(s.Name, "step "); ok {
			st := ""
			for _, kv := range s.Attributes {
				if kv.Key == telemetry.AttrStatus {
					st = kv.Value.AsString()
				}
			}
			spans[id] = append(spans[id], st)
		}
	}
	for id, status := range want {
		if started[id] {
			if got := spans[id]; len(got) != 1 || got[0] != status {
				t.Errorf("spans: step %s has spans %v, want one, %s", id, got, status)
			}
		} else if len(spans[id]) != 0 {
			t.Errorf("spans: step %s never started but has spans %v", id, spans[id])
		}
	}
	if starts != len(spans) {
		t.Errorf("%d progress notifications of a start, %d step spans", starts, len(spans))
	}
}

// TestStatelessClientLogs: a stateless HTTP server sends no logging
// notifications to a client that asked for none — on protocols before
// 2026-07-28, where the SDK gives each request's throwaway session the
// level info, and on 2026-07-28 — and sends the run's lines to one whose
// request carries a level in _meta. (A client that reports unrequested
// notifications as errors, such as the Vercel AI SDK 1.x, sees none.)
func TestStatelessClientLogs(t *testing.T) {
	plan := map[string]any{"plan": map[string]any{"steps": []any{jq("a", 1), jq("b", 2)}}}
	for _, version := range []string{"2025-03-26", v20251125, v20260728} {
		t.Run(version, func(t *testing.T) {
			app := appWithStore(t, "memory", nil)
			srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{Stateless: true}))
			t.Cleanup(srv.Close)
			var mu sync.Mutex
			var got []*mcp.LoggingMessageParams
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "obs", Version: "test"}, &mcp.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					mu.Lock()
					got = append(got, req.Params)
					mu.Unlock()
				},
			}).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: srv.Client()}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(got)
			}
			// Each call's notifications travel on its own response stream,
			// ahead of its result: they have all arrived when it returns.
			callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: plan})
			if n := count(); n != 0 {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%d logging notifications to a client that asked for none, first %v", n, got[0].Data)
			}
			if version != v20260728 {
				return
			}
			callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: plan, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}})
			deadline := time.Now().Add(5 * time.Second) // bounds a hang only
			for count() < 2 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := count(); n < 2 {
				t.Errorf("%d logging notifications after asking for level info in _meta, want the run's lines", n)
			}
		})
	}
}

// TestSetLevelRejectsUnknownLevels checks that logging/setLevel refuses a
// level the specification does not define with invalid params, and takes
// every level it does.
func TestSetLevelRejectsUnknownLevels(t *testing.T) {
	cs := connectInMemory(t, newApp(t, nil), v20251125)
	err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "bogus"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, `"bogus"`) || !strings.Contains(rpcErr.Message, "warning") {
		t.Fatalf("setLevel bogus: err = %v; want invalid params naming the level and the valid ones", err)
	}
	for _, level := range []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"} {
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: level}); err != nil {
			t.Errorf("setLevel %s: %v", level, err)
		}
	}
}
