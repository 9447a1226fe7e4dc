package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

func TestFixtureStdio(t *testing.T) {
	checkGoroutines(t)
	env := startManager(t, map[string]ServerConfig{
		"fx": {Command: fixtureBin},
	}, Options{})
	st := env.status(t, "fx")
	if st.State != StateConnected || st.PID == 0 || st.Transport != "stdio" {
		t.Fatalf("status = %+v, want a connected stdio server with a pid", st)
	}
	testFixtureTools(t, env, "fx")
	eventually(t, 5*time.Second, "the server's stderr in the log", func() bool {
		return strings.Contains(env.logs.String(), `msg="server stderr" server=fx line="fixtureserver: serving on stdio"`)
	})
}

func TestFixtureHTTP(t *testing.T) {
	checkGoroutines(t)
	url := startHTTPFixture(t)
	env := startManager(t, map[string]ServerConfig{
		"web": {URL: url + "/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret-value"}},
	}, Options{})
	st := env.status(t, "web")
	if st.State != StateConnected || st.Transport != "http" || st.PID != 0 {
		t.Fatalf("status = %+v, want a connected http server", st)
	}
	testFixtureTools(t, env, "web")
	if strings.Contains(env.logs.String(), "s3cret-value") {
		t.Error("a header value appears in the log")
	}
}

// testFixtureTools exercises the fixture's tools through the catalog.
func testFixtureTools(t *testing.T, env *testEnv, server string) {
	ctx := t.Context()
	name := func(tool string) string { return server + "__" + tool }
	call := func(t *testing.T, tool string, args map[string]any) *registry.Result {
		t.Helper()
		res, err := env.tool(t, name(tool)).Invoke(ctx, &registry.CallRequest{Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}

	t.Run("catalog", func(t *testing.T) {
		for _, tool := range []string{"echo", "add", "lookup", "sleep", "fail", "crash", "progress", "meta", "text_only", "garbage", "odd_schema", "add_tool", "big"} {
			rt := env.tool(t, name(tool))
			if rt.Source != server || rt.Description == "" || rt.InputSchema == nil || rt.Call == nil {
				t.Errorf("%s: incomplete tool %+v", rt.Name, rt)
			}
			if rt.SchemaProblem != "" {
				t.Errorf("%s: schema problem %q", rt.Name, rt.SchemaProblem)
			}
			if _, err := rt.InputSchema.Resolve(nil); err != nil {
				t.Errorf("%s: input schema does not resolve: %v", rt.Name, err)
			}
			if rt.OutputSchema != nil {
				if _, err := rt.OutputSchema.Resolve(nil); err != nil {
					t.Errorf("%s: output schema does not resolve: %v", rt.Name, err)
				}
			}
		}
		if got := len(env.status(t, server).Tools); got != len(env.cat.Names()) {
			t.Errorf("status counts %d tools, catalog has %d", got, len(env.cat.Names()))
		}
		st := env.status(t, server)
		if len(st.ToolProblems) != 1 || !strings.Contains(st.ToolProblems[0], name("dotted.name")) {
			t.Errorf("tool problems = %q, want the invalid name %s", st.ToolProblems, name("dotted.name"))
		}
		if _, ok := env.cat.Lookup(name("dotted.name")); ok {
			t.Errorf("%s is in the catalog", name("dotted.name"))
		}
		lookup := env.tool(t, name("lookup")).OutputSchema
		if lookup == nil || lookup.Properties["user"] == nil || lookup.Properties["items"] == nil {
			t.Fatalf("lookup output schema = %v, want user and items", lookup)
		}
	})

	t.Run("unusable schema", func(t *testing.T) {
		rt := env.tool(t, name("broken_schema"))
		if !strings.Contains(rt.SchemaProblem, "inputSchema") {
			t.Errorf("SchemaProblem = %q, want the input schema's problem", rt.SchemaProblem)
		}
		if rt.InputSchema.Type != "object" || len(rt.InputSchema.Properties) != 0 {
			t.Errorf("input schema = %v, want a permissive object", rt.InputSchema)
		}
		if got := env.status(t, server).SchemaProblems[rt.Name]; got != rt.SchemaProblem {
			t.Errorf("status schema problem = %q", got)
		}
		if res := call(t, "broken_schema", map[string]any{"x": 1}); res.Text() != "called anyway" {
			t.Errorf("broken_schema = %q", res.Text())
		}
	})

	t.Run("structured", func(t *testing.T) {
		res := call(t, "add", map[string]any{"a": 2, "b": 3})
		if diff := cmp.Diff(map[string]any{"sum": 5.0}, res.Structured); diff != "" {
			t.Errorf("add (-want +got):\n%s", diff)
		}
		res = call(t, "lookup", map[string]any{"id": "x1"})
		got := res.Output().(map[string]any)
		if got["user"].(map[string]any)["name"] != "Ada" || len(got["items"].([]any)) != 2 {
			t.Errorf("lookup = %v", got)
		}
		if len(res.Content) == 0 {
			t.Error("lookup: content blocks were not kept")
		}
	})

	t.Run("tool error", func(t *testing.T) {
		res := call(t, "fail", map[string]any{"message": "boom"})
		if !res.IsError || !strings.Contains(res.Text(), "boom") {
			t.Errorf("fail = %+v, want isError with the message", res)
		}
		// Arguments the server rejects fail the call, not the server.
		res, err := env.tool(t, name("echo")).Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"text": 5}})
		if (err == nil && !res.IsError) || errors.Is(err, registry.ErrServerUnavailable) || registry.IsTransient(err) {
			t.Errorf("echo with a bad argument = %+v, %v; want a tool or protocol error", res, err)
		}
		if st := env.status(t, server); st.State != StateConnected || st.Restarts != 0 {
			t.Errorf("status after a bad argument = %+v", st)
		}
	})

	t.Run("text only", func(t *testing.T) {
		res := call(t, "text_only", nil)
		if res.Structured != nil {
			t.Errorf("structured = %v, want none", res.Structured)
		}
		if diff := cmp.Diff(map[string]any{"text": "just text"}, res.Output()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	})

	t.Run("output violates its schema", func(t *testing.T) {
		_, err := env.tool(t, name("garbage")).Invoke(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "outputSchema") {
			t.Fatalf("garbage: err = %v, want an outputSchema mismatch", err)
		}
		if errors.Is(err, registry.ErrServerUnavailable) || registry.IsTransient(err) {
			t.Errorf("garbage: %v is not a transient server failure", err)
		}
		call(t, "echo", map[string]any{"text": "still serving"})
	})

	t.Run("odd input schema", func(t *testing.T) {
		in := env.tool(t, name("odd_schema")).InputSchema
		if in.Properties["name"].Type != "string" || in.Properties["count"].Type != "integer" || in.Properties["opts"].Type != "object" {
			t.Errorf("odd_schema properties not normalized: %v", in)
		}
		if diff := cmp.Diff([]string{"name"}, in.Required); diff != "" {
			t.Errorf("required (-want +got):\n%s", diff)
		}
	})

	t.Run("meta", func(t *testing.T) {
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		mctx := toolcontext.WithTraceparent(toolcontext.WithDepth(ctx, 2), tp)
		res, err := env.tool(t, name("meta")).Invoke(mctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		meta := res.Structured.(map[string]any)["meta"].(map[string]any)
		if meta[toolcontext.MetaDepth] != 2.0 || meta[toolcontext.MetaTraceparent] != tp {
			t.Errorf("the server saw _meta %v, want depth 2 and the traceparent", meta)
		}
		res = call(t, "meta", nil)
		meta = res.Structured.(map[string]any)["meta"].(map[string]any)
		if meta[toolcontext.MetaDepth] != 0.0 {
			t.Errorf("depth = %v, want 0", meta[toolcontext.MetaDepth])
		}
		if _, ok := meta[toolcontext.MetaTraceparent]; ok {
			t.Errorf("traceparent sent without one in the context: %v", meta)
		}
	})

	t.Run("progress", func(t *testing.T) {
		var mu sync.Mutex
		var got []registry.Progress
		res, err := env.tool(t, name("progress")).Invoke(ctx, &registry.CallRequest{
			Arguments: map[string]any{"n": 3},
			Progress: func(p registry.Progress) {
				mu.Lock()
				got = append(got, p)
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Structured.(map[string]any)["count"] != 3.0 {
			t.Errorf("progress result = %v", res.Structured)
		}
		// Notifications may trail the response; wait for them.
		eventually(t, 5*time.Second, "three progress reports", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 3
		})
		mu.Lock()
		defer mu.Unlock()
		want := []registry.Progress{
			{Progress: 1, Total: 3, Message: "step 1"},
			{Progress: 2, Total: 3, Message: "step 2"},
			{Progress: 3, Total: 3, Message: "step 3"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("progress (-want +got):\n%s", diff)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := env.tool(t, name("sleep")).Invoke(dctx, &registry.CallRequest{Arguments: map[string]any{"ms": 30000}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("sleep past the deadline: err = %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the call returned after %s", d)
		}
		if errors.Is(err, registry.ErrServerUnavailable) {
			t.Errorf("a deadline is not an unavailable server: %v", err)
		}
		if env.status(t, server).State != StateConnected {
			t.Errorf("server state after a deadline = %+v", env.status(t, server))
		}
		call(t, "echo", map[string]any{"text": "after the deadline"})
	})

	t.Run("response too big", func(t *testing.T) {
		_, err := env.tool(t, name("big")).Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"bytes": env.m.opts.MaxResponseBytes + 1}})
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("big: err = %v, want the size limit", err)
		}
		call(t, "big", map[string]any{"bytes": 1000})
	})

	t.Run("list_changed", func(t *testing.T) {
		var changes sync.WaitGroup
		changes.Add(1)
		var once sync.Once
		env.cat.OnChange(func() {
			if _, ok := env.cat.Lookup(name("dyn_echo")); ok {
				once.Do(changes.Done)
			}
		})
		call(t, "add_tool", map[string]any{"name": "dyn_echo"})
		eventually(t, 10*time.Second, "the added tool in the catalog", func() bool {
			_, ok := env.cat.Lookup(name("dyn_echo"))
			return ok
		})
		changes.Wait()
		res := call(t, "dyn_echo", map[string]any{"text": "new"})
		if res.Structured.(map[string]any)["text"] != "new" {
			t.Errorf("dyn_echo = %v", res.Structured)
		}
	})
}

func TestCancelReachesServer(t *testing.T) {
	checkGoroutines(t)
	env := startManager(t, map[string]ServerConfig{"fx": {Command: fixtureBin}}, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := env.tool(t, "fx__sleep").Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"ms": 30000}})
		errc <- err
	}()
	eventually(t, 10*time.Second, "the server to start sleeping", func() bool {
		return strings.Contains(env.logs.String(), `line="sleep started"`)
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	eventually(t, 10*time.Second, "the server to see the cancellation", func() bool {
		return strings.Contains(env.logs.String(), `line="sleep cancelled"`)
	})
}

func TestCrashMidCall(t *testing.T) {
	checkGoroutines(t)
	env := startManager(t, map[string]ServerConfig{"fx": {Command: fixtureBin}}, Options{})
	pid := env.status(t, "fx").PID
	crash := env.tool(t, "fx__crash")
	echo := env.tool(t, "fx__echo")

	_, err := crash.Invoke(t.Context(), nil)
	if !errors.Is(err, registry.ErrServerUnavailable) || !registry.IsTransient(err) {
		t.Fatalf("crash: err = %v, want a transient ErrServerUnavailable", err)
	}
	eventually(t, 10*time.Second, "the crashed process to be reaped", func() bool { return processGone(pid) })

	// The server comes back in the background, with a new process.
	eventually(t, 20*time.Second, "the server to restart", func() bool {
		st := env.status(t, "fx")
		return st.State == StateConnected && st.PID != pid && st.Restarts == 1
	})
	// The tool value held from before the crash works again.
	res, err := echo.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"text": "back"}})
	if err != nil || res.Structured.(map[string]any)["text"] != "back" {
		t.Fatalf("echo after restart = %v, %v", res, err)
	}
	if !strings.Contains(env.logs.String(), "downstream server stopped; restarting") {
		t.Error("the log does not say the server stopped")
	}
	// Connecting at start is routine (debug); coming back is news (info).
	eventually(t, 10*time.Second, "the log to say the server is back", func() bool {
		return strings.Contains(env.logs.String(), `level=INFO msg="downstream server connected"`)
	})
	if n := strings.Count(env.logs.String(), `level=DEBUG msg="downstream server connected"`); n != 1 {
		t.Errorf("the first connection logged %d times at debug, want once:\n%s", n, env.logs.String())
	}
}

func TestCallWhileDown(t *testing.T) {
	checkGoroutines(t)
	// A long backoff keeps the crashed server down while we look.
	env := startManager(t, map[string]ServerConfig{"fx": {Command: fixtureBin}}, Options{
		RetryBackoffMin: time.Hour, RetryBackoffMax: time.Hour,
	})
	echo := env.tool(t, "fx__echo")
	if _, err := env.tool(t, "fx__crash").Invoke(t.Context(), nil); !errors.Is(err, registry.ErrServerUnavailable) {
		t.Fatalf("crash: %v", err)
	}
	eventually(t, 10*time.Second, "the tools to leave the catalog", func() bool { return len(env.cat.Names()) == 0 })
	st := env.status(t, "fx")
	if st.State != StateFailed || st.Error == "" || len(st.Tools) != 0 {
		t.Errorf("status = %+v, want failed with a reason and no tools", st)
	}
	_, err := echo.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"text": "x"}})
	if !errors.Is(err, registry.ErrServerUnavailable) || !registry.IsTransient(err) {
		t.Errorf("echo while down: err = %v, want a transient ErrServerUnavailable", err)
	}
}

func TestServerMissingAtStart(t *testing.T) {
	checkGoroutines(t)
	env := startManager(t, map[string]ServerConfig{
		"ok":      {Command: fixtureBin},
		"failing": {Command: fixtureBin, Args: []string{"-fail-start"}},
		"missing": {Command: "/nonexistent/mcp-server"},
		"off":     {Command: fixtureBin, Disabled: true},
		"bad__nm": {Command: fixtureBin},
	}, Options{})

	if st := env.status(t, "ok"); st.State != StateConnected || len(st.Tools) == 0 {
		t.Errorf("ok: %+v", st)
	}
	for _, name := range []string{"failing", "missing"} {
		st := env.status(t, name)
		if st.State != StateFailed || st.Error == "" || len(st.Tools) != 0 {
			t.Errorf("%s: status %+v, want failed with a reason", name, st)
		}
	}
	if st := env.status(t, "failing"); !strings.Contains(st.Error, "exited with status 2") {
		t.Errorf("failing: error %q does not give the exit status", st.Error)
	}
	if st := env.status(t, "missing"); !strings.Contains(st.Error, "/nonexistent/mcp-server") {
		t.Errorf("missing: error %q does not name the command", st.Error)
	}
	if st := env.status(t, "off"); st.State != StateDisabled {
		t.Errorf("off: %+v", st)
	}
	if st := env.status(t, "bad__nm"); st.State != StateDisabled || !strings.Contains(st.Error, `"__"`) {
		t.Errorf("bad__nm: %+v", st)
	}
	for _, n := range env.cat.Names() {
		if !strings.HasPrefix(n, "ok__") {
			t.Errorf("unexpected tool %s", n)
		}
	}
	// Failed servers are retried.
	eventually(t, 10*time.Second, "retries of the failing server", func() bool {
		return strings.Count(env.logs.String(), `msg="downstream server failed to start" server=failing`) >= 3
	})
	if _, err := env.tool(t, "ok__echo").Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Errorf("the working server stopped working: %v", err)
	}
}

func TestFiltersAndExpose(t *testing.T) {
	checkGoroutines(t)
	hidden := false
	env := startManager(t, map[string]ServerConfig{
		"only":   {Command: fixtureBin, Tools: []string{"echo", "add", "nosuch"}},
		"except": {Command: fixtureBin, ExcludeTools: []string{"crash", "sleep"}, Expose: &hidden},
	}, Options{})
	var only []string
	for _, n := range env.cat.Names() {
		if strings.HasPrefix(n, "only__") {
			only = append(only, n)
		}
	}
	if diff := cmp.Diff([]string{"only__add", "only__echo"}, only); diff != "" {
		t.Errorf("include list (-want +got):\n%s", diff)
	}
	if st := env.status(t, "only"); len(st.ToolProblems) != 1 || !strings.Contains(st.ToolProblems[0], `"nosuch"`) {
		t.Errorf("tool problems = %q, want the missing included tool", st.ToolProblems)
	}
	if _, ok := env.cat.Lookup("except__crash"); ok {
		t.Error("except__crash was excluded but is in the catalog")
	}
	env.tool(t, "except__echo")
	if !env.m.Exposed("only__echo") || env.m.Exposed("except__echo") || !env.m.Exposed("builtin_tool") {
		t.Error("Exposed does not follow the expose setting")
	}
}

func TestCollisionsAreReported(t *testing.T) {
	checkGoroutines(t)
	cat := registry.NewCatalog(registry.Tool{
		Name: "fx__echo", Source: "builtin", Description: "squatter",
		Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) { return nil, nil },
	})
	m := NewManager(map[string]ServerConfig{"fx": {Command: fixtureBin}}, cat, Options{RetryBackoffMin: 10 * time.Millisecond})
	defer m.Close()
	m.Start(t.Context())
	st := m.Status()[0]
	if st.State != StateConnected {
		t.Fatalf("status %+v", st)
	}
	if len(st.ToolProblems) != 1 || !strings.Contains(st.ToolProblems[0], `"fx__echo"`) || !strings.Contains(st.ToolProblems[0], "builtin") {
		t.Errorf("tool problems = %q, want the collision with builtin", st.ToolProblems)
	}
	if got, _ := cat.Lookup("fx__echo"); got.Source != "builtin" {
		t.Errorf("fx__echo now comes from %s", got.Source)
	}
	if _, ok := cat.Lookup("fx__add"); !ok {
		t.Error("fx__add missing: one collision must not drop the other tools")
	}
	if slicesContains(st.Tools, "fx__echo") {
		t.Error("status lists the colliding tool as loaded")
	}
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCloseKillsProcessGroup(t *testing.T) {
	checkGoroutines(t)
	// The server starts a process of its own, which stays in its process
	// group: Close must take it too.
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := `"$FIXTURE" -http 127.0.0.1:0 >/dev/null 2>&1 & echo $! > "$PIDFILE"; exec "$FIXTURE"`
	env := startManager(t, map[string]ServerConfig{
		"sh": {Command: "/bin/sh", Args: []string{"-c", script}, Env: map[string]string{"FIXTURE": fixtureBin, "PIDFILE": pidFile}},
	}, Options{})
	st := env.status(t, "sh")
	if st.State != StateConnected {
		t.Fatalf("status %+v", st)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if processGone(grandchild) {
		t.Fatalf("the server's own process %d is not running", grandchild)
	}
	if err := env.m.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the server's own process to die", func() bool { return processGone(grandchild) })
	if !processGone(st.PID) {
		t.Errorf("server process %d survived Close", st.PID)
	}
}

func TestConnectToNothingOverHTTP(t *testing.T) {
	checkGoroutines(t)
	env := startManager(t, map[string]ServerConfig{
		"gone": {URL: "http://127.0.0.1:1/mcp", Timeout: Duration(2 * time.Second)},
	}, Options{})
	st := env.status(t, "gone")
	if st.State != StateFailed || !strings.Contains(st.Error, "http://127.0.0.1:1/mcp") {
		t.Errorf("status = %+v", st)
	}
}

// Compile-time check that the manager's progress routing matches the SDK.
var _ = (&mcp.ClientOptions{}).ProgressNotificationHandler

func TestHTTPServerGoneAndBack(t *testing.T) {
	checkGoroutines(t)
	url, stop := startHTTPFixtureAt(t, "127.0.0.1:0")
	env := startManager(t, map[string]ServerConfig{"web": {URL: url + "/mcp"}}, Options{})
	echo := env.tool(t, "web__echo")
	stop()

	_, err := echo.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"text": "x"}})
	if !errors.Is(err, registry.ErrServerUnavailable) || !registry.IsTransient(err) {
		t.Fatalf("echo with the server gone: err = %v, want a transient ErrServerUnavailable", err)
	}
	eventually(t, 10*time.Second, "the tools to leave the catalog", func() bool { return len(env.cat.Names()) == 0 })

	// The same address again: the manager reconnects by itself.
	startHTTPFixtureAt(t, strings.TrimPrefix(url, "http://"))
	eventually(t, 20*time.Second, "the server to be back", func() bool {
		return env.status(t, "web").State == StateConnected
	})
	res, err := echo.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"text": "back"}})
	if err != nil || res.Structured.(map[string]any)["text"] != "back" {
		t.Fatalf("echo after the server came back = %v, %v", res, err)
	}
}

func TestDefaultCallTimeout(t *testing.T) {
	checkGoroutines(t)
	// The server's timeout also bounds each attempt to start it: long
	// enough for a loaded machine, and the test waits for the attempt that
	// connects.
	env := startManager(t, map[string]ServerConfig{"fx": {Command: fixtureBin, Timeout: Duration(2 * time.Second)}}, Options{})
	eventually(t, 30*time.Second, "the server to connect", func() bool {
		_, ok := env.cat.Lookup("fx__sleep")
		return ok
	})
	_, err := env.tool(t, "fx__sleep").Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"ms": 30000}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the server's timeout to apply", err)
	}
	// A deadline of the caller's own wins over the server's default.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := env.tool(t, "fx__sleep").Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"ms": 2500}})
	if err != nil || res.Structured.(map[string]any)["slept_ms"] != 2500.0 {
		t.Fatalf("sleep within the caller's deadline = %v, %v", res, err)
	}
}

// TestChildDiesWithOrchestra kills a process running a manager with
// SIGKILL, which runs no cleanup at all, and checks that its server went
// with it.
func TestChildDiesWithOrchestra(t *testing.T) {
	if os.Getenv("MCPSERVER_TEST_PARENT") == "1" {
		m := NewManager(map[string]ServerConfig{"fx": {Command: fixtureBin}}, registry.NewCatalog(), Options{})
		m.Start(context.Background())
		fmt.Println("pid", m.Status()[0].PID)
		select {} // until killed
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux kills children when their parent dies")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithOrchestra$")
	cmd.Env = append(os.Environ(), "MCPSERVER_TEST_PARENT=1", "MCPSERVER_FIXTURE="+fixtureBin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "pid ") {
				lines <- sc.Text()
				break
			}
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	var pid int
	select {
	case line := <-lines:
		pid, _ = strconv.Atoi(strings.TrimPrefix(line, "pid "))
	case <-time.After(30 * time.Second):
		t.Fatal("the helper process did not report its server")
	}
	if pid == 0 || processGone(pid) {
		t.Fatalf("server pid %d is not running", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually(t, 10*time.Second, "the server to die with its parent", func() bool { return processGone(pid) })
}
