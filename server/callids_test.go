package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/server/runlog"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// metaRecorder is a go-sdk MCP server whose echo tool records the _meta
// of every call by the text it was sent, and whose fail tool fails.
type metaRecorder struct {
	mu    sync.Mutex
	metas map[string]map[string]any
	srv   *mcp.Server
}

func newMetaRecorder() *metaRecorder {
	m := &metaRecorder{metas: map[string]map[string]any{}}
	m.srv = mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(m.srv, &mcp.Tool{Name: "echo", Description: "Returns its text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in text) (*mcp.CallToolResult, text, error) {
			m.mu.Lock()
			m.metas[in.Text] = req.Params.GetMeta()
			m.mu.Unlock()
			return nil, in, nil
		})
	mcp.AddTool(m.srv, &mcp.Tool{Name: "fail", Description: "Fails."},
		func(ctx context.Context, req *mcp.CallToolRequest, in text) (*mcp.CallToolResult, text, error) {
			return nil, text{}, fmt.Errorf("the fail tool failed on %q", in.Text)
		})
	return m
}

// serve serves the recorder over Streamable HTTP.
func (m *metaRecorder) serve(t *testing.T) string {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m.srv }, nil)
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func (m *metaRecorder) meta(text string) (map[string]any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, ok := m.metas[text]
	return meta, ok
}

// waitTools waits until the catalog of app holds every tool of names.
func waitTools(t *testing.T, app *server.App, names ...string) {
	t.Helper()
	ready := make(chan struct{}, 1)
	app.Catalog.OnChange(func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	for {
		all := true
		for _, n := range names {
			_, ok := app.Catalog.Lookup(n)
			all = all && ok
		}
		if all {
			return
		}
		select {
		case <-ready:
		case <-t.Context().Done():
			t.Fatalf("the tools %v never appeared", names)
		}
	}
}

// callIDNames are the documented ids of a tool call's _meta.
var callIDNames = []string{"request_id", "context_id", "user_id", "tenant", "exec_id", "step_id"}

// TestEveryIDToEveryTool: a caller with a bearer token, a tenant and its
// own request and context ids runs a plan over HTTP whose plan step, for_each
// iterations and agent (its model behind the local OpenAI fake) call a
// go-sdk server that records each call's _meta. Each call carries every
// documented id with its value: the caller's request, context, user and
// tenant, and the exec id and step id of the run and step that made it (the
// agent's own run and its call). A server with forward_ids false gets none of
// them, and the caller's token is nowhere in any _meta. The failing tool's
// log line is "<tool>: call failed" with the same ids. A direct call of
// the tool carries the caller's ids.
func TestEveryIDToEveryTool(t *testing.T) {
	const token = "alice-secret-token"
	rec := newMetaRecorder()
	url := rec.serve(t)
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if len(r.ToolResults()) == 0 {
			return fakeopenai.Call("d__echo", `{"text": "agent"}`)
		}
		return fakeopenai.Text("done")
	})
	t.Setenv("ALICE_TOKEN", token)
	cfg := config.Default()
	cfg.Server.Auth = config.Auth{Tokens: []config.NamedToken{{Name: "alice", TokenEnv: "ALICE_TOKEN"}}}
	cfg.Tenants = map[string]config.Tenant{"acme": {Match: config.TenantMatch{Tokens: []string{"alice"}}}}
	off := false
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"d": {URL: url}, "off": {URL: url, ForwardIDs: &off}}
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Echoes.", Instructions: "You are helper.", Tools: []string{"d__echo"},
		Model: &llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: fake.URL(), MaxRetries: -1}}}
	logs := &servertest.SyncBuffer{}
	app, err := server.New(t.Context(), cfg, server.Options{Version: "test", Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	waitTools(t, app, "d__echo", "d__fail", "off__echo")
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	cs := connectAs(t, srv, token)

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{
		Meta: mcp.Meta{toolcontext.MetaRequestID: "req-42", toolcontext.MetaContextID: "ctx-7"},
		Name: orchestrate.ToolName,
		Arguments: plan(
			map[string]any{"id": "first", "tool": "d__echo", "arguments": map[string]any{"text": "plan"}},
			map[string]any{"id": "each", "for_each": []any{"x", "y"}, "as": "v", "do": map[string]any{"tool": "d__echo", "arguments": map[string]any{"text": "loop-${v}"}}},
			map[string]any{"id": "ask", "tool": "agent__helper", "arguments": map[string]any{"user_query": "echo"}},
			map[string]any{"id": "quiet", "tool": "off__echo", "arguments": map[string]any{"text": "off"}},
			map[string]any{"id": "f", "tool": "d__fail", "arguments": map[string]any{"text": "boom"}},
		),
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var env orchestrate.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Artifact == nil {
		t.Fatalf("decoding the envelope: %v\n%s", err, data)
	}
	var agentExec string
	for _, s := range env.Artifact.Steps {
		if s.ID == "ask" {
			agentExec = agentOutput(t, s).Metadata.ExecID
		}
	}
	if agentExec == "" || env.Metadata.ExecID == "" {
		t.Fatalf("no exec ids: run %q, agent %q\n%s", env.Metadata.ExecID, agentExec, data)
	}
	caller := map[string]string{"request_id": "req-42", "context_id": "ctx-7", "user_id": "alice", "tenant": "acme"}
	for text, call := range map[string][2]string{
		"plan":   {env.Metadata.ExecID, "first"},
		"loop-x": {env.Metadata.ExecID, "each[0]"},
		"loop-y": {env.Metadata.ExecID, "each[1]"},
		"agent":  {agentExec, "call_0"},
	} {
		meta, ok := rec.meta(text)
		if !ok {
			t.Errorf("the call %q never reached the server", text)
			continue
		}
		want := map[string]string{"exec_id": call[0], "step_id": call[1]}
		for k, v := range caller {
			want[k] = v
		}
		for _, name := range callIDNames {
			if got := meta[toolcontext.MetaPrefix+name]; got != want[name] {
				t.Errorf("the call %q: _meta[%q] = %v, want %q", text, toolcontext.MetaPrefix+name, got, want[name])
			}
		}
		if meta[toolcontext.MetaDepth] == nil {
			t.Errorf("the call %q lost its depth: %v", text, meta)
		}
	}
	// A direct call of a listed downstream tool: the caller's ids, and no
	// run's.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: mcp.Meta{toolcontext.MetaRequestID: "req-43"},
		Name: "d__echo", Arguments: map[string]any{"text": "direct"}}); err != nil {
		t.Fatal(err)
	}
	direct, _ := rec.meta("direct")
	want := map[string]any{"request_id": "req-43", "user_id": "alice", "tenant": "acme", "context_id": nil, "exec_id": nil, "step_id": nil}
	for name, v := range want {
		if got := direct[toolcontext.MetaPrefix+name]; got != v {
			t.Errorf("the direct call: _meta[%q] = %v, want %v", toolcontext.MetaPrefix+name, got, v)
		}
	}

	meta, ok := rec.meta("off")
	if !ok {
		t.Fatal("the call of the server with forward_ids false never arrived")
	}
	for _, name := range callIDNames {
		if v, ok := meta[toolcontext.MetaPrefix+name]; ok {
			t.Errorf("forward_ids false, yet _meta[%q] = %v", toolcontext.MetaPrefix+name, v)
		}
	}
	if meta[toolcontext.MetaDepth] == nil {
		t.Errorf("forward_ids false dropped the depth too: %v", meta)
	}
	rec.mu.Lock()
	all, _ := json.Marshal(rec.metas)
	rec.mu.Unlock()
	if strings.Contains(string(all), token) {
		t.Errorf("the caller's token reached a tool's _meta: %s", all)
	}

	found := false
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != runlog.FailedCall("d__fail") {
			continue
		}
		found = true
		want := map[string]string{"exec_id": env.Metadata.ExecID, "step_id": "f", "tool": "d__fail"}
		for k, v := range caller {
			want[k] = v
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("the failing call's log line: %s = %v, want %q\n%s", k, m[k], v, line)
			}
		}
	}
	if !found {
		t.Errorf("no log line %q:\n%s", runlog.FailedCall("d__fail"), logs.String())
	}
}
