package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
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
