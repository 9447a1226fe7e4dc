package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
)

// lineWriter hands the first line written to it to a channel.
type lineWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	line chan string
	sent bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if s := w.buf.String(); !w.sent && strings.Contains(s, "\n") {
		w.sent = true
		w.line <- strings.TrimSpace(s[:strings.Index(s, "\n")])
	}
	return len(p), nil
}

// TestUI serves the viewer of a local store on loopback, prints its URL,
// shows the store's runs there, and stops when asked.
func TestUI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orchestra.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.StartRun(t.Context(), store.Run{ExecID: "recorded-run", Tool: "cli", Goal: "a goal to find"}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := &lineWriter{line: make(chan string, 1)}
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"ui", "--store", path}, strings.NewReader(""), stdout, &stderr) }()
	var url string
	select {
	case url = <-stdout.line:
	case code := <-done:
		t.Fatalf("ui ended with %d before printing its URL: %s", code, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("ui printed no URL")
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/ui/") {
		t.Fatalf("ui printed %q, want http://127.0.0.1:PORT/ui/", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "a goal to find") {
		t.Errorf("GET %s: %d\n%s", url, resp.StatusCode, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("ui stopped with %d: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("ui did not stop")
	}
}

// TestUINonLoopbackRefused: the viewer of a local store has no
// authentication, so it serves loopback only, and says what to use instead.
func TestUINonLoopbackRefused(t *testing.T) {
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"ui", "--store", "memory", "--addr", "0.0.0.0:0"}, strings.NewReader(""), &stdout, &stderr)
	if code != ExitInvalid || !strings.Contains(stderr.String(), "serve --http") {
		t.Errorf("ui --addr 0.0.0.0:0: exit %d, stderr %q; want a usage error pointing at serve --http", code, stderr.String())
	}
}
