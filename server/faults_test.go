package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// faultApp starts an app with the fixture server as "fx" and the given
// extra tools, logging to a buffer the test can read. At cleanup it checks
// that no fixture process outlives the app.
func faultApp(t *testing.T, cfg *config.Config, tools ...registry.Tool) (*server.App, *lockedBuffer) {
	t.Helper()
	if cfg == nil {
		cfg = config.Default()
	}
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"fx": {Command: fixture(t)}}
	logs := &lockedBuffer{}
	app, err := server.New(t.Context(), cfg, server.Options{Tools: tools, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	var pidsMu sync.Mutex
	pids := map[int]bool{}
	notePIDs := func() {
		pidsMu.Lock()
		defer pidsMu.Unlock()
		for _, st := range app.Downstream() {
			if st.PID > 0 {
				pids[st.PID] = true
			}
		}
	}
	notePIDs()
	t.Cleanup(func() {
		notePIDs()
		app.Close()
		for pid := range pids {
			waitGone(t, pid)
		}
	})
	return app, logs
}

func fixturePID(t *testing.T, app *server.App) int {
	t.Helper()
	for _, st := range app.Downstream() {
		if st.Name == "fx" && st.PID > 0 {
			return st.PID
		}
	}
	t.Fatal("the fixture server has no process")
	return 0
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDownstreamGoneBetweenValidationAndExecution: a plan validated
// against the fixture's tools loses the fixture process while its first
// step runs; the step that needs it then fails with server_unavailable
// (or succeeds if the server is back already), the plan answers, and later
// plans run once the server is restarted.
func TestDownstreamGoneBetweenValidationAndExecution(t *testing.T) {
	p := &probe{block: make(chan struct{}), started: make(chan struct{}, 1)}
	app, _ := faultApp(t, nil, p.tool(t, "probe"))
	cs := connectInMemory(t, app, v20251125)
	pid := fixturePID(t, app)

	type answer struct {
		res *mcp.CallToolResult
		env *servertest.Envelope
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: plan(
			map[string]any{"id": "first", "tool": "probe", "arguments": map[string]any{"label": "a"}},
			map[string]any{"id": "second", "tool": "fx__echo", "arguments": map[string]any{"text": "$first.output.label"}},
		)})
		if err != nil {
			t.Errorf("tools/call: %v", err)
			done <- answer{}
			return
		}
		done <- answer{res, servertest.Decode(t, res)}
	}()
	<-p.started // validated, and running the first step
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	close(p.block)
	a := <-done
	if a.env == nil {
		t.Fatal("no answer")
	}
	second := a.env.Artifact.Steps[1]
	switch {
	case second.Status == orchestrate.StatusSuccess:
		// The server was restarted in time.
	case second.Error != nil && second.Error.Code == orchestrate.CodeServerUnavailable && strings.Contains(second.Error.Message, "fx"):
	default:
		t.Errorf("the step whose server disappeared: want server_unavailable naming fx; got:\n%s", servertest.Text(a.res))
	}
	if a.env.Artifact.Steps[0].Status != orchestrate.StatusSuccess {
		t.Errorf("the first step's result was lost: %+v", a.env.Artifact.Steps[0])
	}
	eventually(t, "the fixture server to come back", func() bool {
		res, _ := servertest.Call(t, cs, plan(map[string]any{"tool": "fx__echo", "arguments": map[string]any{"text": "back"}}), nil)
		return !res.IsError
	})
}

// TestDownstreamSlowAndOversized: a slow answer within the step timeout
// succeeds; a result over limits.max_downstream_response_bytes fails only
// its step, with the limit named.
func TestDownstreamSlowAndOversized(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxDownstreamResponseBytes = 4096
	app, _ := faultApp(t, cfg)
	cs := connectInMemory(t, app, v20251125)
	res, env := servertest.Call(t, cs, plan(map[string]any{"tool": "fx__sleep", "arguments": map[string]any{"ms": 300}}), nil)
	if res.IsError || !env.Artifact.Success {
		t.Errorf("a slow answer: want success; got:\n%s", servertest.Text(res))
	}
	res, env = servertest.Call(t, cs, plan(
		map[string]any{"tool": "fx__big", "arguments": map[string]any{"bytes": 100000}, "on_error": "continue"},
		map[string]any{"tool": "fx__big", "arguments": map[string]any{"bytes": 100}},
	), nil)
	if e := env.Artifact.Steps[0].Error; e == nil || e.Code != orchestrate.CodeToolError || !strings.Contains(e.Message, "4096") {
		t.Errorf("an oversized downstream result: want tool_error naming the limit; got:\n%s", servertest.Text(res))
	}
	if env.Artifact.Steps[1].Status != orchestrate.StatusSuccess {
		t.Errorf("a small result after the oversized one failed:\n%s", servertest.Text(res))
	}
}

// TestClientDisconnectMidPlan: a client whose HTTP connection drops while
// its plan waits on a downstream call has its plan cancelled and the
// downstream call cancelled too (the fixture logs "sleep cancelled"), and
// nothing keeps running. The same for a client that cancels its call.
func TestClientDisconnectMidPlan(t *testing.T) {
	app, logs := faultApp(t, nil)
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	sleepPlan, _ := json.Marshal(plan(map[string]any{"tool": "fx__sleep", "arguments": map[string]any{"ms": 60000}}))

	t.Run("connection dropped", func(t *testing.T) {
		started, cancelled := logs.count(`line="sleep started"`), logs.count(`line="sleep cancelled"`)
		ctx, cancel := context.WithCancel(t.Context())
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":` + string(sleepPlan) + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", v20260728)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", orchestrate.ToolName)
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = resp.Body.Read(make([]byte, 1))
				resp.Body.Close()
			}
			errc <- err
		}()
		eventually(t, "the downstream sleep to start", func() bool { return logs.count(`line="sleep started"`) > started })
		cancel() // the client goes away: its connection closes
		<-errc
		eventually(t, "the downstream sleep to be cancelled", func() bool { return logs.count(`line="sleep cancelled"`) > cancelled })
		eventually(t, "the plan to end", func() bool { return app.InFlight() == 0 })
	})

	t.Run("call cancelled", func(t *testing.T) {
		started, cancelled := logs.count(`line="sleep started"`), logs.count(`line="sleep cancelled"`)
		cs, _ := connectHTTP(t, app, server.HTTPOptions{}, v20251125)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: json.RawMessage(sleepPlan)})
			errc <- err
		}()
		eventually(t, "the downstream sleep to start", func() bool { return logs.count(`line="sleep started"`) > started })
		cancel()
		<-errc
		eventually(t, "the downstream sleep to be cancelled", func() bool { return logs.count(`line="sleep cancelled"`) > cancelled })
		eventually(t, "the plan to end", func() bool { return app.InFlight() == 0 })
		servertest.StillServes(t, cs)
	})
}
