package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/registry"
)

func TestTopScanner(t *testing.T) {
	tests := []struct {
		in, id, method string
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"id":99,"method":"x"}}`, `7`, ``},
		{`{"result":{"id":99,"content":[{"text":"a \"id\": 3, }"}]}, "id" : "abc" }`, `"abc"`, ``},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"id":1}}`, ``, `"notifications/message"`},
		{`{"method":"tools/call","id":{"x":1},"params":{}}`, `{"x":1}`, `"tools/call"`},
		{`{"idx":1,"id":2}`, `2`, ``},
		{`not json`, ``, ``},
	}
	for _, tt := range tests {
		var s topScanner
		// One byte at a time and all at once must agree.
		for _, b := range []byte(tt.in) {
			s.write([]byte{b})
		}
		if string(s.id) != tt.id || string(s.method) != tt.method {
			t.Errorf("%s: id %s method %s, want %s %s", tt.in, s.id, s.method, tt.id, tt.method)
		}
	}
}

func filterAll(t *testing.T, in string, limit int64) (string, []string) {
	t.Helper()
	var drops []string
	notes := newNotificationLimiter(func(m string, n int) { drops = append(drops, fmt.Sprintf("%s x%d", m, n)) })
	f := newLineFilter(strings.NewReader(in), limit, notes, func(reason string, sample []byte) { drops = append(drops, reason) })
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), drops
}

func TestLineFilter(t *testing.T) {
	t.Run("garbage is dropped", func(t *testing.T) {
		out, drops := filterAll(t, "hello from a print statement\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{broken\n\n", 1<<20)
		if out != "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n" {
			t.Errorf("out = %q", out)
		}
		if len(drops) != 2 {
			t.Errorf("drops = %v, want the print and the broken line", drops)
		}
	})
	t.Run("an oversized response becomes an error for its id", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 30<<20) + `"}]},"id":42}` + "\n" + `{"jsonrpc":"2.0","id":43,"result":{}}` + "\n"
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, _ := filterAll(t, big, 1<<20)
		runtime.ReadMemStats(&after)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("out = %q", out)
		}
		var msg struct {
			ID    int `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &msg); err != nil || msg.ID != 42 || msg.Error.Code != oversizeCode || !strings.Contains(msg.Error.Message, "limits.max_downstream_response_bytes") {
			t.Errorf("replacement = %s (%v)", lines[0], err)
		}
		if lines[1] != `{"jsonrpc":"2.0","id":43,"result":{}}` {
			t.Errorf("the next message = %s", lines[1])
		}
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 8<<20 {
			t.Errorf("filtering a 30 MB message allocated %d bytes; it must not be held", grown)
		}
	})
	t.Run("log notifications are dropped, others thinned", func(t *testing.T) {
		var b strings.Builder
		for range 10000 {
			b.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n")
		}
		for i := range 1000 {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d}}`+"\n", i)
		}
		b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
		out, _ := filterAll(t, b.String(), 1<<20)
		if strings.Contains(out, "notifications/message") {
			t.Error("a log notification passed")
		}
		n := strings.Count(out, "notifications/progress")
		if n < 400 || n >= 1000 {
			t.Errorf("%d of 1000 progress notifications passed at once; want the burst of 400 (and a few refilled)", n)
		}
		if !strings.HasSuffix(out, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n") {
			t.Error("the response after the flood is missing")
		}
	})
}

func TestSSEFilter(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":5,"result":{"text":"` + strings.Repeat("y", 2<<20) + `"}}`
	stream := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
		"id: 2\nevent: message\ndata: " + big + "\n\n" +
		"id: 3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\n"
	f := &sseFilter{r: bufio.NewReader(strings.NewReader(stream)), body: io.NopCloser(nil), limit: 1 << 20, notes: newNotificationLimiter(nil)}
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSpace(string(out)), "\n\n")
	if len(events) != 2 {
		t.Fatalf("events = %q", out)
	}
	if !strings.Contains(events[0], `"id":5,"error":{"code":-32001`) {
		t.Errorf("the oversized event became %q", events[0])
	}
	if events[1] != "id: 3\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}" {
		t.Errorf("the last event = %q", events[1])
	}
}

// TestOversizedAndStrayOutput: a stdio server that answers with far more
// than the limit, prints garbage to stdout, or floods notifications keeps
// its session: the oversized call fails with the limit, and the next call
// works on the same process.
func TestOversizedAndStrayOutput(t *testing.T) {
	checkGoroutines(t)
	env := startManager(t, map[string]ServerConfig{"fx": {Command: fixtureBin}}, Options{MaxResponseBytes: 1 << 20})
	pid := env.status(t, "fx").PID
	call := func(tool string, args map[string]any) (*registry.Result, error) {
		return env.tool(t, "fx__"+tool).Invoke(t.Context(), &registry.CallRequest{Arguments: args})
	}
	echo := func() {
		t.Helper()
		res, err := call("echo", map[string]any{"text": "still here"})
		if err != nil || res.IsError {
			t.Fatalf("echo after: %v, %v", res, err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := call("big", map[string]any{"bytes": 40 << 20})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") || !strings.Contains(err.Error(), "limits.max_downstream_response_bytes") {
		t.Fatalf("big: err = %v, want the limit", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Errorf("a 40 MB answer cost %d MiB; it must be read through the limit", grown>>20)
	}
	echo()

	if _, err := call("stray", map[string]any{"lines": 3, "text": "debug: this is not JSON-RPC"}); err != nil {
		t.Fatalf("stray: %v", err)
	}
	echo()
	if !strings.Contains(env.logs.String(), "a line that is not a JSON-RPC message") {
		t.Error("the stray lines are not logged")
	}

	start := time.Now()
	if _, err := call("stray", map[string]any{"lines": 100000, "text": `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"flood"}}`}); err != nil {
		t.Fatalf("flood: %v", err)
	}
	t.Logf("100,000 log notifications took %s", time.Since(start))
	echo()

	if st := env.status(t, "fx"); st.PID != pid || st.Restarts != 0 {
		t.Errorf("the server was restarted (pid %d -> %d, restarts %d): its session must survive", pid, st.PID, st.Restarts)
	}
}

// TestOversizedOverHTTP: an HTTP server's answer is read through the
// limit, as JSON and as an event stream, and the session goes on.
func TestOversizedOverHTTP(t *testing.T) {
	checkGoroutines(t)
	url := startHTTPFixture(t)
	env := startManager(t, map[string]ServerConfig{"web": {URL: url + "/mcp"}}, Options{MaxResponseBytes: 1 << 20})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := env.tool(t, "web__big").Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"bytes": 40 << 20}})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "limits.max_downstream_response_bytes") {
		t.Fatalf("big over HTTP: err = %v, want the limit", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Errorf("a 40 MB answer cost %d MiB; it must be read through the limit", grown>>20)
	}
	res, err := env.tool(t, "web__echo").Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"text": "after"}})
	if err != nil || res.IsError {
		t.Fatalf("echo after: %v, %v", res, err)
	}
	if st := env.status(t, "web"); st.Restarts != 0 {
		t.Errorf("the session was lost: %+v", st)
	}
}

// TestLimitTransportJSON: a JSON answer over the limit is replaced by an
// error for the request's id, read no further than the limit.
func TestLimitTransportJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":9,"result":{"text":"`)
		chunk := bytes.Repeat([]byte("z"), 1<<16)
		for range 400 { // 26 MB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"}}`)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &limitTransport{base: http.DefaultTransport, limit: 1 << 20, notes: newNotificationLimiter(nil)}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"id":9,"error":{"code":-32001`) {
		t.Errorf("body = %.300s", body)
	}
}
