package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/registry"
)

// fixtureBin is the fixture server, built once by TestMain.
var fixtureBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if bin := os.Getenv("MCPSERVER_FIXTURE"); bin != "" {
		fixtureBin = bin // a helper process started by a test
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "mcpserver-fixture")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fixtureBin = filepath.Join(dir, "fixtureserver")
	build := exec.Command("go", "build", "-o", fixtureBin, "../../testdata/fixtureserver")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the fixture server: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually polls cond every few milliseconds for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkGoroutines fails the test if, after its other cleanups (which run
// first), more goroutines are running than when it started.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines leaked: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// processGone reports whether no process with the id pid is running. A
// zombie is not running: orphans are reaped by whatever init the system
// has, which may be slow or absent in containers. The manager's own
// children are waited for, so they never linger as zombies.
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}

type testEnv struct {
	m    *Manager
	cat  *registry.Catalog
	logs *logBuffer
}

// startManager starts a manager for servers and closes it at the end of
// the test, checking that no process of its stdio servers survives.
func startManager(t testing.TB, servers map[string]ServerConfig, opts Options) *testEnv {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.RetryBackoffMin == 0 {
		opts.RetryBackoffMin = 20 * time.Millisecond
		opts.RetryBackoffMax = 200 * time.Millisecond
	}
	if opts.MaxResponseBytes == 0 {
		opts.MaxResponseBytes = 256 << 10
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 20 * time.Second
	}
	cat := registry.NewCatalog()
	m := NewManager(servers, cat, opts)
	var pids []int
	var pidsMu sync.Mutex
	t.Cleanup(func() {
		for _, st := range m.Status() {
			if st.PID != 0 {
				pidsMu.Lock()
				pids = append(pids, st.PID)
				pidsMu.Unlock()
			}
		}
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, pid := range pids {
			if !processGone(pid) {
				t.Errorf("server process %d still exists after Close", pid)
			}
		}
		if len(cat.Names()) != 0 {
			t.Errorf("tools left in the catalog after Close: %v", cat.Names())
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", logs)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	m.Start(ctx)
	return &testEnv{m: m, cat: cat, logs: logs}
}

func (e *testEnv) status(t *testing.T, name string) ServerStatus {
	t.Helper()
	for _, st := range e.m.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for server %q", name)
	return ServerStatus{}
}

func (e *testEnv) tool(t testing.TB, name string) registry.Tool {
	t.Helper()
	tool, ok := e.cat.Lookup(name)
	if !ok {
		t.Fatalf("tool %s not in the catalog; have %v; status %+v", name, e.cat.Names(), e.m.Status())
	}
	return tool
}

// startHTTPFixture runs the fixture server over Streamable HTTP and returns
// its URL, read from the line it prints once it listens.
func startHTTPFixture(t *testing.T) string {
	t.Helper()
	url, _ := startHTTPFixtureAt(t, "127.0.0.1:0")
	return url
}

// startHTTPFixtureAt runs the fixture server over Streamable HTTP on addr
// and returns its URL and a function that stops it.
func startHTTPFixtureAt(t *testing.T, addr string) (string, func()) {
	t.Helper()
	cmd := exec.Command(fixtureBin, "-http", addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		addr, found := strings.CutPrefix(line, "listening on ")
		if !ok || !found {
			t.Fatalf("fixture server printed %q, want \"listening on URL\"", line)
		}
		return addr, stop
	case <-time.After(20 * time.Second):
		t.Fatal("the HTTP fixture server did not report its address")
	}
	return "", stop
}
