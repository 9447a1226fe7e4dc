package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

// gate is a tool whose calls each wait for the test to let them end:
// started tells of each call, release ends one.
type gate struct {
	started chan struct{}
	release chan struct{}
	stopped chan struct{}
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 16), release: make(chan struct{}), stopped: make(chan struct{}, 16)}
}

func (g *gate) tool(t testing.TB, name string) registry.Tool {
	return registry.Tool{
		Name:        name,
		Description: "Waits until the test lets it end. A test tool.",
		Source:      "test",
		InputSchema: mustSchema(t, `{"type":"object"}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			g.started <- struct{}{}
			select {
			case <-g.release:
				return &registry.Result{Structured: map[string]any{"ok": true}}, nil
			case <-ctx.Done():
				g.stopped <- struct{}{}
				return nil, ctx.Err()
			}
		},
	}
}

// gatedSteps is a background plan of n steps of tool.
func gatedSteps(tool string, n int) map[string]any {
	steps := make([]any, n)
	for i := range steps {
		steps[i] = map[string]any{"tool": tool, "arguments": map[string]any{}}
	}
	return map[string]any{"plan": map[string]any{"steps": steps}, "background": true}
}

// bgEnvelope is what the tests read of a background answer.
type bgEnvelope struct {
	Artifact struct {
		Status     string `json:"status"`
		Success    bool   `json:"success"`
		Background *struct {
			ExecID     string `json:"exec_id"`
			Record     string `json:"record"`
			Steps      int    `json:"steps"`
			StepsEnded int    `json:"steps_ended"`
			How        string `json:"how"`
		} `json:"background"`
		Steps []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"steps"`
		Errors           []orchestrate.Error `json:"errors"`
		ValidationErrors []orchestrate.Issue `json:"validation_errors"`
	} `json:"artifact"`
	Metadata struct {
		ExecID string `json:"exec_id"`
		Record string `json:"record"`
	} `json:"_metadata"`
}

func callBG(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, *bgEnvelope) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", orchestrate.ToolName, err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var env bgEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return res, &env
}

func receive(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestBackgroundRunAwaitAndSubscribe: a background plan is answered while
// its first step still waits (status running, its exec id and record);
// an await that times out returns its progress, which grows as steps
// end; a client subscribed to its record is told as steps end; the last
// await returns the final envelope. A background request that fails its
// checks is refused at once, as without background.
func TestBackgroundRunAwaitAndSubscribe(t *testing.T) {
	g := newGate()
	app := newApp(t, nil, g.tool(t, "gate"))
	updates := make(chan string, 64)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "bg", Version: "test"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updates <- req.Params.URI },
	})
	// At 2025-11-25 a subscription is a request answered once it is
	// registered (at 2026-07-28 it is a listen stream, acknowledged
	// asynchronously).
	cs, err := client.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: v20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("the server does not offer resource subscriptions: %+v", caps.Resources)
	}

	res, env := callBG(t, cs, gatedSteps("gate", 3))
	receive(t, g.started, "the first step")
	bg := env.Artifact.Background
	if res.IsError || env.Artifact.Status != orchestrate.StatusRunning || bg == nil || bg.ExecID == "" || bg.Steps != 3 || bg.StepsEnded != 0 ||
		env.Metadata.Record != server.RecordURI(bg.ExecID) || !strings.Contains(bg.How, `"await"`) {
		t.Fatalf("the background answer: error %v, %+v", res.IsError, env.Artifact)
	}
	id := bg.ExecID
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: server.RecordURI(id)}); err != nil {
		t.Fatalf("subscribing to the run's record: %v", err)
	}

	g.release <- struct{}{}
	receive(t, g.started, "the second step") // the first ended
	select {
	case uri := <-updates:
		if uri != server.RecordURI(id) {
			t.Fatalf("an update of %s; want %s", uri, server.RecordURI(id))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/updated after a step ended")
	}
	res, env = callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 1}})
	if res.IsError || env.Artifact.Status != orchestrate.StatusRunning || env.Artifact.Background == nil ||
		env.Artifact.Background.StepsEnded != 1 || env.Artifact.Background.Steps != 3 {
		t.Fatalf("an await while step 2 runs: %+v %+v", env.Artifact, env.Artifact.Background)
	}

	g.release <- struct{}{}
	receive(t, g.started, "the third step")
	res, env = callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 1}})
	if env.Artifact.Background == nil || env.Artifact.Background.StepsEnded != 2 {
		t.Fatalf("progress did not grow: %+v", env.Artifact.Background)
	}

	done := make(chan *bgEnvelope, 1)
	go func() {
		_, env := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 60000}})
		done <- env
	}()
	g.release <- struct{}{}
	select {
	case env = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the await did not return when the run ended")
	}
	if env.Artifact.Status != orchestrate.StatusSuccess || len(env.Artifact.Steps) != 3 || env.Metadata.ExecID != id {
		t.Fatalf("the final envelope: %+v", env.Artifact)
	}
	// Once ended, the run is awaited from its record.
	_, again := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id}})
	if again.Artifact.Status != orchestrate.StatusSuccess || again.Metadata.ExecID != id {
		t.Fatalf("awaiting the ended run: %+v", again.Artifact)
	}

	// Checks come first: an invalid plan is refused, nothing runs.
	res, env = callBG(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "no_such_tool"}}}, "background": true})
	if !res.IsError || env.Artifact.Status != orchestrate.StatusFailed || len(env.Artifact.ValidationErrors) == 0 || env.Artifact.Background != nil {
		t.Fatalf("an invalid background plan: %+v", env.Artifact)
	}
	// An await of a run that does not exist is unknown_run.
	res, env = callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": "no-such-run"}})
	if !res.IsError || len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeUnknownRun {
		t.Fatalf("awaiting an unknown run: %+v", env.Artifact)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: server.RecordURI("no-such-run")}); err == nil {
		t.Error("subscribing to the record of a run that does not exist succeeded")
	}
}

// TestBackgroundCancelAndOwners: over HTTP with tokens, a background run
// goes on after the connection that started it closed; another caller's
// await and cancel get unknown_run (the answer for a run that does not
// exist, word for word) and leave it running; its owner's cancel from a
// new connection stops it: the step is cancelled, the envelope and the
// record say cancelled.
func TestBackgroundCancelAndOwners(t *testing.T) {
	g := newGate()
	cfg := tenantConfig(t)
	app := newApp(t, cfg, g.tool(t, "a_gate"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)

	alice := connectAs(t, srv, "alice-secret-token")
	_, env := callBG(t, alice, gatedSteps("a_gate", 1))
	receive(t, g.started, "the step")
	if env.Artifact.Background == nil {
		t.Fatalf("no background answer: %+v", env.Artifact)
	}
	id := env.Artifact.Background.ExecID
	alice.Close() // the run does not depend on the connection

	for _, who := range []string{"bob-secret-token", "ops-secret-token"} {
		other := connectAs(t, srv, who)
		for _, op := range []string{"await", "cancel"} {
			res, env := callBG(t, other, map[string]any{op: map[string]any{"exec_id": id}})
			if !res.IsError || len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeUnknownRun {
				t.Fatalf("%s of another's run: %+v", op, env.Artifact)
			}
			_, none := callBG(t, other, map[string]any{op: map[string]any{"exec_id": "no-such-run"}})
			if len(none.Artifact.ValidationErrors) != 1 || !reflect.DeepEqual(none.Artifact.ValidationErrors[0], withID(env.Artifact.ValidationErrors[0], id, "no-such-run")) {
				t.Fatalf("%s: another's run and one that does not exist get different answers:\n%+v\n%+v", op, env.Artifact.ValidationErrors[0], none.Artifact.ValidationErrors)
			}
		}
		if err := other.Subscribe(t.Context(), &mcp.SubscribeParams{URI: server.RecordURI(id)}); err == nil {
			t.Error("another caller subscribed to the run's record")
		}
	}
	select {
	case <-g.stopped:
		t.Fatal("the run stopped when its connection closed, or when another caller cancelled it")
	default:
	}

	again := connectAs(t, srv, "alice-secret-token")
	res, env := callBG(t, again, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 1}})
	if res.IsError || env.Artifact.Status != orchestrate.StatusRunning {
		t.Fatalf("the owner's await from a new connection: %+v", env.Artifact)
	}
	_, env = callBG(t, again, map[string]any{"cancel": map[string]any{"exec_id": id}})
	receive(t, g.stopped, "the step's cancellation")
	if env.Artifact.Status != orchestrate.StatusCancelled || env.Artifact.Success ||
		len(env.Artifact.Steps) != 1 || env.Artifact.Steps[0].Status != orchestrate.StatusCancelled {
		t.Fatalf("the cancelled run's envelope: %+v", env.Artifact)
	}
	if err := app.Store().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	run, steps, err := app.Store().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.StatusCancelled || len(steps) != 1 || steps[0].Status != orchestrate.StatusCancelled {
		t.Fatalf("the record: %s, steps %+v", run.Status, steps)
	}
	// The owner awaits it from its record: the final envelope, cancelled.
	if _, env := callBG(t, again, map[string]any{"await": map[string]any{"exec_id": id}}); env.Artifact.Status != orchestrate.StatusCancelled {
		t.Fatalf("awaiting the cancelled run from its record: %+v", env.Artifact)
	}
	// A cancelled run can be resumed, as a failed one can: its step runs
	// again.
	go func() { <-g.started; g.release <- struct{}{} }()
	if res, env := callBG(t, again, map[string]any{"resume": map[string]any{"exec_id": id}}); res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("resuming the cancelled run: %+v", env.Artifact)
	}
}

// withID is a copy of is with the exec id from replaced by to in its
// message.
func withID(is orchestrate.Issue, from, to string) orchestrate.Issue {
	is.Message = strings.ReplaceAll(is.Message, from, to)
	return is
}

// TestAwaitReadFailureIsUnknownRun: when the records cannot be read, an
// await gets the answer a run that does not exist gets, word for word:
// what a failure says cannot tell ids apart.
func TestAwaitReadFailureIsUnknownRun(t *testing.T) {
	app := newApp(t, nil)
	cs := connectInMemory(t, app, v20251125)
	_, unknown := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": "no-such-run"}})
	if err := app.Store().Close(); err != nil {
		t.Fatal(err)
	}
	_, failed := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": "other-run"}})
	if len(unknown.Artifact.ValidationErrors) != 1 || unknown.Artifact.ValidationErrors[0].Code != orchestrate.CodeUnknownRun ||
		len(failed.Artifact.ValidationErrors) != 1 || !reflect.DeepEqual(failed.Artifact.ValidationErrors[0], withID(unknown.Artifact.ValidationErrors[0], "no-such-run", "other-run")) {
		t.Fatalf("a run that does not exist and a failed read get different answers:\n%+v\n%+v", unknown.Artifact.ValidationErrors, failed.Artifact.ValidationErrors)
	}
}

// TestBackgroundHoldsItsSlot: a background run keeps the slot of
// limits.max_concurrent_plans its call took until it ends, so that it
// cannot escape the limit: with one slot, a call made while it runs is
// refused as busy, and one made after it ended runs.
func TestBackgroundHoldsItsSlot(t *testing.T) {
	g := newGate()
	cfg := config.Default()
	cfg.Limits.MaxConcurrentPlans = 1
	cfg.Limits.QueueTimeout = time.Millisecond
	app := newApp(t, cfg, g.tool(t, "gate"))
	cs := connectInMemory(t, app, v20251125)

	_, env := callBG(t, cs, gatedSteps("gate", 1))
	receive(t, g.started, "the step")
	id := env.Artifact.Background.ExecID
	res, busy := callBG(t, cs, gatedSteps("gate", 1))
	if !res.IsError || len(busy.Artifact.ValidationErrors) != 1 || busy.Artifact.ValidationErrors[0].Code != orchestrate.CodeBusy {
		t.Fatalf("a call while the background run holds the only slot: %+v", busy.Artifact)
	}
	// An await takes no slot.
	if res, env := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 1}}); res.IsError || env.Artifact.Status != orchestrate.StatusRunning {
		t.Fatalf("an await while the slot is held: %+v", env.Artifact)
	}
	g.release <- struct{}{}
	if _, env := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 60000}}); env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("the background run: %+v", env.Artifact)
	}
	cfg.Limits.QueueTimeout = time.Minute // only bounds a hang now
	go func() { <-g.started; g.release <- struct{}{} }()
	res, env = callBG(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "gate", "arguments": map[string]any{}}}}})
	if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("a call after the background run ended: %+v", env.Artifact)
	}
}

// TestStdioShutdownDrainsBackgroundRuns: SIGTERM (the serve context ends)
// treats a background run like any other: ServeStdio waits for it through
// the grace period, then cancels it and returns only once it ended, its
// step cancelled.
func TestStdioShutdownDrainsBackgroundRuns(t *testing.T) {
	g := newGate()
	cfg := config.Default()
	cfg.Server.ShutdownGrace = 50 * time.Millisecond
	app := newApp(t, cfg, g.tool(t, "gate"))
	ctx, term := context.WithCancel(t.Context())
	inW, sc, done := pipeStdio(ctx, app)
	defer inW.Close()
	io.WriteString(inW, initializeBody+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(inW, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"background":true,"plan":{"steps":[{"tool":"gate","arguments":{}}]}}}}`+"\n")
	sc.Scan() // initialize
	sc.Scan()
	if !strings.Contains(sc.Text(), `"status":"running"`) {
		t.Fatalf("the background call's answer: %s", sc.Text())
	}
	receive(t, g.started, "the step")
	term()
	for sc.Scan() {
	}
	if err := <-done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	if n := app.InFlight(); n != 0 {
		t.Fatalf("ServeStdio returned with %d plans running; the background run was not drained", n)
	}
	receive(t, g.stopped, "the background step's cancellation")
}

// TestBackgroundRunWithIdempotencyKey: a background call with an
// idempotency key starts one run; its repeats, while the run goes on and
// after it ended, get the same answer — the run started, its exec id to
// await — and start nothing.
func TestBackgroundRunWithIdempotencyKey(t *testing.T) {
	g := newGate()
	app := newApp(t, nil, g.tool(t, "gate"))
	cs := connectObs(t, app, nil)
	input := gatedSteps("gate", 1)
	input["idempotency_key"] = "weekly-report"

	_, first := callBG(t, cs, input)
	receive(t, g.started, "the run's step")
	if first.Artifact.Status != orchestrate.StatusRunning || first.Artifact.Background == nil {
		t.Fatalf("the background answer: %+v", first.Artifact)
	}
	id := first.Artifact.Background.ExecID
	_, repeat := callBG(t, cs, input)
	if repeat.Artifact.Status != orchestrate.StatusRunning || repeat.Artifact.Background == nil || repeat.Artifact.Background.ExecID != id {
		t.Fatalf("a repeat while the run goes on: %+v (want the run %s)", repeat.Artifact, id)
	}
	g.release <- struct{}{}
	_, final := callBG(t, cs, map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 60000}})
	if final.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("the run: %+v", final.Artifact)
	}
	_, late := callBG(t, cs, input)
	if late.Artifact.Background == nil || late.Artifact.Background.ExecID != id {
		t.Fatalf("a repeat after the run ended: %+v (want the run %s)", late.Artifact, id)
	}
	select {
	case <-g.started:
		t.Fatal("a repeat started another run")
	default:
	}
	var page server.ExecutionPage
	readJSON(t, cs, server.ExecutionsURI, &page)
	if len(page.Executions) != 1 {
		t.Errorf("%d runs recorded; want 1", len(page.Executions))
	}
}
