package server_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

var (
	fixtureOnce sync.Once
	fixtureBin  string
	fixtureErr  error
)

// fixture builds the fixture MCP server of testdata/fixtureserver once.
func fixture(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "orchestra-fixture-")
		if err != nil {
			fixtureErr = err
			return
		}
		fixtureBin = filepath.Join(dir, "fixtureserver")
		out, err := exec.Command("go", "build", "-o", fixtureBin, "../testdata/fixtureserver").CombinedOutput()
		if err != nil {
			fixtureErr = errors.New(string(out))
		}
	})
	if fixtureErr != nil {
		t.Fatalf("building the fixture server: %v", fixtureErr)
	}
	return fixtureBin
}

// npmServer returns the configuration that runs an installed npm MCP
// server with node; without the packages it skips, or fails when
// ORCHESTRA_REQUIRE_NPM is set (as in CI).
func npmServer(t testing.TB, pkg string, args ...string) mcpserver.ServerConfig {
	t.Helper()
	entry, err := filepath.Abs(filepath.Join("..", "testdata", "npm", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || nodeErr != nil {
		msg := "the npm test servers are not installed: run `npm ci` in testdata/npm (and install node)"
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return mcpserver.ServerConfig{Command: node, Args: append([]string{entry}, args...)}
}

// downstreamApp starts an app with the given downstream servers and a client
// session to it over in-memory transports.
func downstreamApp(t testing.TB, servers map[string]mcpserver.ServerConfig, copts *mcp.ClientOptions) (*server.App, *mcp.ClientSession) {
	t.Helper()
	return downstreamAppWith(t, servers, copts, nil)
}

// downstreamAppWith is downstreamApp with the configuration changed by
// edit first.
func downstreamAppWith(t testing.TB, servers map[string]mcpserver.ServerConfig, copts *mcp.ClientOptions, edit func(*config.Config)) (*server.App, *mcp.ClientSession) {
	t.Helper()
	cfg := config.Default()
	cfg.MCPServers = servers
	if edit != nil {
		edit(cfg)
	}
	app, err := server.New(t.Context(), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pids := []int{}
		for _, st := range app.Downstream() {
			if st.PID > 0 {
				pids = append(pids, st.PID)
			}
		}
		app.Close()
		for _, pid := range pids {
			waitGone(t, pid)
		}
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, copts).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return app, cs
}

// waitGone fails the test if process pid is still alive after a bounded wait.
func waitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("downstream server process %d outlived orchestra", pid)
}

func plan(steps ...map[string]any) map[string]any {
	list := make([]any, len(steps))
	for i, s := range steps {
		list[i] = s
	}
	return map[string]any{"plan": map[string]any{"steps": list}}
}

// TestDownstreamNPMServers chains the real filesystem and memory servers: a
// plan reads files in parallel, feeds their contents through templates into
// the memory server and reads the graph back; a template into a field the
// real outputSchema lacks fails validation before anything runs.
func TestDownstreamNPMServers(t *testing.T) {
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "b.txt"), []byte("beta"), 0o644); err != nil {
		t.Fatal(err)
	}
	memory := npmServer(t, "server-memory")
	memory.Env = map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
	_, cs := downstreamApp(t, map[string]mcpserver.ServerConfig{
		"fs":     npmServer(t, "server-filesystem", files),
		"memory": memory,
	}, nil)

	good := plan(
		map[string]any{"id": "files", "parallel": []any{
			map[string]any{"id": "a", "tool": "fs__read_text_file", "arguments": map[string]any{"path": filepath.Join(files, "a.txt")}},
			map[string]any{"id": "b", "tool": "fs__read_text_file", "arguments": map[string]any{"path": filepath.Join(files, "b.txt")}},
		}},
		map[string]any{"id": "store", "tool": "memory__create_entities", "arguments": map[string]any{"entities": []any{
			map[string]any{"name": "a", "entityType": "file", "observations": []any{"$a.output.content"}},
			map[string]any{"name": "b", "entityType": "file", "observations": []any{"b says ${files.output.b.content}"}},
		}}},
		map[string]any{"id": "graph", "tool": "memory__read_graph", "arguments": map[string]any{}},
	)
	res, env := servertest.Call(t, cs, good, nil)
	if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
		t.Fatalf("the plan failed:\n%s", servertest.Text(res))
	}
	graph := env.Artifact.Steps[2].Output.(map[string]any)
	entities := graph["entities"].([]any)
	got := map[string]any{}
	for _, e := range entities {
		m := e.(map[string]any)
		got[m["name"].(string)] = m["observations"].([]any)[0]
	}
	if got["a"] != "alpha" || got["b"] != "b says beta" {
		t.Errorf("the graph read back holds %v; want a=alpha and b=\"b says beta\"", got)
	}

	bad := plan(
		map[string]any{"id": "a", "tool": "fs__read_text_file", "arguments": map[string]any{"path": filepath.Join(files, "a.txt")}},
		map[string]any{"tool": "memory__create_entities", "arguments": map[string]any{"entities": []any{
			map[string]any{"name": "c", "entityType": "file", "observations": []any{"$a.output.text"}},
		}}},
	)
	res, env = servertest.Call(t, cs, bad, nil)
	if !res.IsError || len(env.Artifact.ValidationErrors) != 1 {
		t.Fatalf("want one validation error; got:\n%s", servertest.Text(res))
	}
	if is := env.Artifact.ValidationErrors[0]; is.Code != orchestrate.CodeFieldNotFound || !strings.Contains(is.Message, "content") {
		t.Errorf("want field_not_found naming the available field content; got %+v", is)
	}
	for _, s := range env.Artifact.Steps {
		if s.Status != orchestrate.StatusSkipped {
			t.Errorf("step %s is %s; an invalid plan runs nothing", s.ID, s.Status)
		}
	}
}

// TestDownstreamFaults: a server missing at start-up, one crashing mid-plan,
// one hanging past the step timeout and one returning malformed results each
// fail only what they must, with a clear code, and orchestra keeps serving.
func TestDownstreamFaults(t *testing.T) {
	bin := fixture(t)
	app, cs := downstreamApp(t, map[string]mcpserver.ServerConfig{
		"fx":   {Command: bin},
		"gone": {Command: filepath.Join(t.TempDir(), "no-such-server")},
	}, nil)

	// Missing at start-up: its tools are absent, with a clear reason.
	for _, st := range app.Downstream() {
		if st.Name == "gone" && (st.State == mcpserver.StateConnected || st.Error == "") {
			t.Errorf("server gone: state %s, error %q; want failed with a reason", st.State, st.Error)
		}
	}
	res, env := servertest.Call(t, cs, plan(map[string]any{"tool": "gone__anything", "arguments": map[string]any{}}), nil)
	if !res.IsError || len(env.Artifact.ValidationErrors) == 0 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeUnknownTool {
		t.Errorf("a tool of a server that did not start: want unknown_tool; got:\n%s", servertest.Text(res))
	}

	// Crash mid-plan: only the step that needed the server fails.
	res, env = servertest.Call(t, cs, plan(map[string]any{"id": "g", "merge": "all_settled", "parallel": []any{
		map[string]any{"id": "boom", "tool": "fx__crash", "arguments": map[string]any{}},
		map[string]any{"id": "ok", "tool": "json_query", "arguments": map[string]any{"query": ".", "input": 1}},
	}}), nil)
	g := env.Artifact.Steps[0]
	if env.Artifact.Status != orchestrate.StatusPartial || g.Children[0].Error == nil || g.Children[0].Error.Code != orchestrate.CodeServerUnavailable || g.Children[1].Status != orchestrate.StatusSuccess {
		t.Errorf("a crash mid-plan: want the crashing step server_unavailable and the other step success; got:\n%s", servertest.Text(res))
	}
	// The server is restarted for later plans.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if restarted(app, "fx") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed server was not restarted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, env = servertest.Call(t, cs, plan(map[string]any{"tool": "fx__echo", "arguments": map[string]any{"text": "again"}}), nil)
	if res.IsError {
		t.Errorf("after the restart: %s", servertest.Text(res))
	}

	// Hanging past the step timeout.
	res, env = servertest.Call(t, cs, plan(map[string]any{"tool": "fx__sleep", "timeout_ms": 100, "arguments": map[string]any{"ms": 60000}}), nil)
	if e := env.Artifact.Steps[0].Error; e == nil || e.Code != orchestrate.CodeTimeout {
		t.Errorf("a hanging server: want timeout; got:\n%s", servertest.Text(res))
	}

	// Malformed results.
	res, env = servertest.Call(t, cs, plan(map[string]any{"tool": "fx__garbage", "arguments": map[string]any{}}), nil)
	if e := env.Artifact.Steps[0].Error; e == nil || e.Code != orchestrate.CodeToolError {
		t.Errorf("a malformed result: want tool_error; got:\n%s", servertest.Text(res))
	}
	servertest.StillServes(t, cs)
}

// restarted reports whether server name came back after a crash.
func restarted(app *server.App, name string) bool {
	for _, st := range app.Downstream() {
		if st.Name == name && st.State == mcpserver.StateConnected && st.Restarts > 0 {
			_, ok := app.Catalog.Lookup(name + "__echo")
			return ok
		}
	}
	return false
}

// TestDownstreamListChanged: a downstream server that adds a tool refreshes
// the catalog, and orchestra's own clients are told.
func TestDownstreamListChanged(t *testing.T) {
	changed := make(chan struct{}, 16)
	_, cs := downstreamApp(t, map[string]mcpserver.ServerConfig{"fx": {Command: fixture(t)}}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	res, _ := servertest.Call(t, cs, plan(map[string]any{"tool": "fx__add_tool", "arguments": map[string]any{"name": "fresh"}}), nil)
	if res.IsError {
		t.Fatal(servertest.Text(res))
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no tools/list_changed reached the client, or the new tool never appeared")
		}
		tools, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var fresh, repeated bool
		for _, tool := range tools.Tools {
			fresh = fresh || tool.Name == "fx__fresh"
			if tool.Name == orchestrate.ToolName {
				repeated = strings.Contains(tool.Description, "fx__fresh")
			}
		}
		if fresh {
			if repeated {
				t.Error("the description of agent_orchestrate repeats a listed tool")
			}
			return
		}
	}
}

// TestDirectCallCarriesMeta calls exposed downstream tools directly, as a
// client (or an upstream orchestra) does: the progress token, the
// traceparent and the depth (one more than the caller's) reach the
// downstream server, and its progress reaches the client.
func TestDirectCallCarriesMeta(t *testing.T) {
	progress := make(chan float64, 16)
	_, cs := downstreamApp(t, map[string]mcpserver.ServerConfig{"fx": {Command: fixture(t)}}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params.Progress
		},
	})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fx__meta", Arguments: map[string]any{},
		Meta: mcp.Meta{"traceparent": tp, "io.github.orchestra-mcp/depth": 1}})
	if err != nil || res.IsError {
		t.Fatalf("fx__meta: %v %v", err, servertest.Text(res))
	}
	got, _ := res.StructuredContent.(map[string]any)["meta"].(map[string]any)
	if got["traceparent"] != tp || got["io.github.orchestra-mcp/depth"] != float64(2) {
		t.Errorf("the downstream server got _meta %v; want the traceparent and depth 2", got)
	}

	params := &mcp.CallToolParams{Name: "fx__progress", Arguments: map[string]any{"n": 3}}
	params.SetProgressToken("direct")
	if res, err := cs.CallTool(t.Context(), params); err != nil || res.IsError {
		t.Fatalf("fx__progress: %v", err)
	}
	// Notifications are handled apart from the response: wait for them.
	timeout := time.After(10 * time.Second)
	for i := range 3 {
		select {
		case <-progress:
		case <-timeout:
			t.Fatalf("got %d progress notifications for a direct call; the downstream tool sent 3", i)
		}
	}

	// At limits.max_depth (3) a downstream tool is one hop too deep.
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"text": "x"},
		Meta: mcp.Meta{"io.github.orchestra-mcp/depth": 3}})
	if err != nil || !res.IsError || !strings.Contains(servertest.Text(res), string(orchestrate.CodeDepthExceeded)) {
		t.Errorf("a direct call at depth 3: %v %s; want a depth_exceeded tool error", err, servertest.Text(res))
	}
}
