package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
)

// rawStdio serves an app over pipes and lets a test write raw lines.
type rawStdio struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func newRawStdio(t *testing.T) *rawStdio {
	t.Helper()
	app := newApp(t, smallLimit())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- app.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	r := &rawStdio{t: t, in: inW, out: sc, done: done}
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("ServeStdio did not return after stdin closed")
		}
	})
	return r
}

func (r *rawStdio) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("writing %q: %v", line, err)
	}
}

// recv reads the next message that is a response (it skips notifications).
func (r *rawStdio) recv() map[string]any {
	r.t.Helper()
	for r.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(r.out.Bytes(), &m); err != nil {
			r.t.Fatalf("the server wrote a line that is not JSON: %q", r.out.Text())
		}
		if _, ok := m["id"]; ok {
			return m
		}
	}
	r.t.Fatalf("the server closed stdout: %v", r.out.Err())
	return nil
}

// TestStdioRawInput writes malformed and wrong messages to the stdio
// server and checks each gets an answer and the server goes on.
func TestStdioRawInput(t *testing.T) {
	r := newRawStdio(t)
	r.send(initializeBody)
	if res := r.recv(); res["result"] == nil {
		t.Fatalf("initialize: %v", res)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	call := func(id int, args string) string {
		return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":` + args + `}}`
	}
	ok := call(100, `{"plan":{"steps":[{"tool":"render","arguments":{"template":"ok"}}]}}`)
	stillServes := func() {
		t.Helper()
		r.send(ok)
		res := r.recv()
		result, _ := res["result"].(map[string]any)
		if result == nil || result["isError"] == true {
			t.Fatalf("the server does not answer normally any more: %v", res)
		}
	}

	for _, tc := range []struct {
		name, line string
		want       string // in the error or the result
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":2,"method":`, "parse"},
		{"not JSON", `hello`, "parse"},
		{"arguments a string", call(3, `"{\"plan\": 1}"`), "JSON object"},
		{"arguments a number", call(4, `42`), "JSON object"},
		{"wrong types", call(5, `{"plan":{"steps":[{"tool":7}]}}`), "tool"},
		{"unknown field", call(6, `{"plan":{"steps":[]},"dryrun":true}`), "dry_run"},
		{"unknown tool", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"rendr","arguments":{}}}`, `did you mean \"render\"`}, // as escaped in JSON
		{"huge input", call(8, `{"plan":{"steps":[{"tool":"render","arguments":{"template":"x"}}]},"bindings":{"blob":"`+strings.Repeat("a", 100<<10)+`"}}`), "server.max_request_bytes"},
		{"unknown method", `{"jsonrpc":"2.0","id":9,"method":"tools/cal"}`, "method"},
		{"a batch", `[{"jsonrpc":"2.0","id":10,"method":"ping"}]`, "batch"},
		{"not a message", `{"hello":"world"}`, "JSON-RPC"},
		{"huge line without an id", `{"params":"` + strings.Repeat("a", 100<<10) + `"}`, "server.max_request_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.send(tc.line)
			res := r.recv()
			data, _ := json.Marshal(res)
			if !strings.Contains(strings.ToLower(string(data)), strings.ToLower(tc.want)) {
				t.Errorf("the answer does not mention %q: %s", tc.want, truncate(data))
			}
			stillServes()
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// pipeStdio serves app over pipes until ctx is done or stdin closes, and
// returns stdin, a scanner of stdout (closed once ServeStdio returns) and
// the channel its error arrives on.
func pipeStdio(ctx context.Context, app *server.App) (*io.PipeWriter, *bufio.Scanner, <-chan error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- app.ServeStdio(ctx, inR, outW)
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return inW, sc, done
}

// TestStdioOversizedRequestWithTrailingID sends a request over
// server.max_request_bytes whose "id" comes last, as the TypeScript SDK
// writes it: the answer is an error for that id naming the limit, and the
// server goes on.
func TestStdioOversizedRequestWithTrailingID(t *testing.T) {
	r := newRawStdio(t)
	r.send(initializeBody)
	r.recv()
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, size := range []int{200 << 10, 4 << 20} {
		line := `{"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"bindings":{"blob":"` + strings.Repeat("a", size) + `"},"plan":{"steps":[]}}},"jsonrpc":"2.0","id":42}`
		r.send(line)
		res := r.recv()
		data, _ := json.Marshal(res)
		if id, _ := res["id"].(float64); id != 42 || !strings.Contains(string(data), "server.max_request_bytes") {
			t.Fatalf("%d bytes: want an error for id 42 naming the limit, got %s", len(line), truncate(data))
		}
	}
	r.send(`{"jsonrpc":"2.0","id":43,"method":"ping"}`)
	if res := r.recv(); res["id"] != float64(43) || res["result"] == nil {
		t.Fatalf("ping after the oversized requests: %v", res)
	}
}

// TestStdioAnswersWhatItReadBeforeEOF writes five plans and closes stdin
// at once: each is answered before the server ends.
func TestStdioAnswersWhatItReadBeforeEOF(t *testing.T) {
	inW, sc, done := pipeStdio(t.Context(), newApp(t, nil))
	go func() {
		io.WriteString(inW, initializeBody+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		for i := range 5 {
			io.WriteString(inW, `{"jsonrpc":"2.0","id":`+itoa(10+i)+`,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"plan":{"steps":[{"tool":"render","arguments":{"template":"n={{.n}}","values":{"n":`+itoa(i)+`}}}]}}}}`+"\n")
		}
		inW.Close()
	}()
	answered := map[float64]bool{}
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		if id, ok := m["id"].(float64); ok && id >= 10 && m["result"] != nil {
			answered[id] = true
		}
	}
	if err := <-done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	if len(answered) != 5 {
		t.Errorf("answered %v; want all 5 requests written before stdin closed", answered)
	}
}

// TestStdioShutdownDuringPlan cancels the serve context (SIGTERM) while a
// plan runs: after the grace period the plan is cancelled, the client
// gets its partial answer and the record is not a success.
func TestStdioShutdownDuringPlan(t *testing.T) {
	s := newStopper()
	cfg := config.Default()
	cfg.Server.ShutdownGrace = 50 * time.Millisecond
	app := newApp(t, cfg, s.tool(t))
	ctx, term := context.WithCancel(t.Context())
	inW, sc, done := pipeStdio(ctx, app)
	defer inW.Close()
	io.WriteString(inW, initializeBody+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(inW, strings.Replace(waitCall, "%s", "", 1)+"\n")
	sc.Scan() // initialize
	await(t, s.started, "the step to start")
	term()
	var answer map[string]any
	for sc.Scan() {
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		if m["id"] == float64(5) {
			answer = m
		}
	}
	if err := <-done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	res, _ := answer["result"].(map[string]any)
	if res == nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["structuredContent"]), "cancelled") {
		t.Fatalf("want a cancelled partial answer to the running plan, got %v", answer)
	}
	checkCancelledRecord(t, app)
}

// TestStdioShutdownWithStdoutFull stops reading stdout while the server
// writes: a shutdown still returns.
func TestStdioShutdownWithStdoutFull(t *testing.T) {
	cfg := config.Default()
	cfg.Server.ShutdownGrace = 50 * time.Millisecond
	app := newApp(t, cfg)
	ctx, term := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe() // nobody reads outR: every write blocks
	defer outR.Close()
	done := make(chan error, 1)
	go func() { done <- app.ServeStdio(ctx, inR, outW) }()
	go io.WriteString(inW, initializeBody+"\n")
	term()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ServeStdio did not return on shutdown while stdout was full")
	}
}
