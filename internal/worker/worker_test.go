//go:build linux

package worker

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own worker.
func TestMain(m *testing.M) {
	if IsChild() {
		Serve(testHandlers)
	}
	os.Exit(m.Run())
}

var sink []byte

var testHandlers = map[string]Handler{
	"echo": func(p []byte) ([]byte, error) { return p, nil },
	// alloc allocates the number of bytes in its payload, at once.
	"alloc": func(p []byte) ([]byte, error) {
		n, _ := strconv.Atoi(string(p))
		sink = make([]byte, n)
		sink[n-1] = 1
		sink = nil
		return []byte("allocated"), nil
	},
	// steps allocates 1, 2, 4, ... MiB, each while the one before is
	// live, up to the number of MiB in its payload.
	"steps": func(p []byte) ([]byte, error) {
		n, _ := strconv.Atoi(string(p))
		var b []byte
		for size := 1 << 20; size <= n<<20; size *= 2 {
			c := make([]byte, size)
			copy(c, b)
			b = c
		}
		return []byte(strconv.Itoa(len(b))), nil
	},
	// double doubles a string until it is a terabyte long.
	"double": func([]byte) ([]byte, error) {
		s := "a"
		for range 40 {
			s += s
		}
		return []byte(strconv.Itoa(len(s))), nil
	},
	// spin never ends and never looks at anything.
	"spin": func([]byte) ([]byte, error) {
		n := 0
		for {
			n++
		}
	},
	"fail":  func(p []byte) ([]byte, error) { return nil, errors.New("bad input: " + string(p)) },
	"panic": func([]byte) ([]byte, error) { panic("oops") },
	"exit":  func([]byte) ([]byte, error) { os.Exit(7); return nil, nil },
	"big": func(p []byte) ([]byte, error) {
		n, _ := strconv.Atoi(string(p))
		return make([]byte, n), nil
	},
	"env": func([]byte) ([]byte, error) { return []byte(strings.Join(os.Environ(), "\n")), nil },
	// long spins for 200 ms of CPU time, then returns.
	"long": func([]byte) ([]byte, error) {
		start := cpuTime()
		for cpuTime()-start < 200*time.Millisecond {
		}
		return []byte("done"), nil
	},
	"pid": func([]byte) ([]byte, error) { return []byte(strconv.Itoa(os.Getpid())), nil },
	// hold keeps the number of bytes in its payload live, in small
	// objects the collector must trace, and allocates garbage forever:
	// with the live heap at the memory limit, the collector runs without
	// end and the job never gets past it.
	"hold": func(p []byte) ([]byte, error) {
		n, _ := strconv.Atoi(string(p))
		type node struct {
			next *node
			pad  [48]byte
		}
		var live *node
		for range n / 64 {
			live = &node{next: live}
		}
		for {
			sink = make([]byte, 1<<10)
			if live == nil {
				break
			}
		}
		return nil, nil
	},
	// tellAndSpin writes its pid to the FIFO named by its payload, then
	// spins forever.
	"tellAndSpin": func(p []byte) ([]byte, error) {
		if err := os.WriteFile(string(p), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, err
		}
		for {
		}
	},
}

func newTestPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	if !Supported {
		t.Skip("workers are not supported on this platform")
	}
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = 64 << 20
	}
	p := NewPool(opts)
	t.Cleanup(func() { p.Close() })
	return p
}

func do(t *testing.T, p *Pool, handler, payload string, cpu time.Duration) (string, error) {
	t.Helper()
	out, err := p.Do(t.Context(), Job{Handler: handler, Payload: []byte(payload), CPU: cpu})
	return string(out), err
}

func wantLimit(t *testing.T, err error, limit string) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != limit {
		t.Fatalf("err = %v (%T), want a %s LimitError", err, err, limit)
	}
}

func TestEchoReusesOneWorker(t *testing.T) {
	p := newTestPool(t, Options{})
	for i := range 5 {
		got, err := do(t, p, "echo", "hello "+strconv.Itoa(i), 0)
		if err != nil || got != "hello "+strconv.Itoa(i) {
			t.Fatalf("echo = %q, %v", got, err)
		}
	}
	if n := p.Started(); n != 1 {
		t.Errorf("started %d workers for 5 sequential jobs, want 1", n)
	}
}

// TestOneAllocationPastTheLimit is the case a heap sampler misses: a
// single allocation of 2 GiB. The kernel refuses it, whatever the load.
func TestOneAllocationPastTheLimit(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := do(t, p, "alloc", strconv.Itoa(2<<30), 0)
	wantLimit(t, err, "memory")
	if le := err.(*LimitError); le.Bytes != 64<<20 || !strings.Contains(le.Error(), "67108864") {
		t.Errorf("the error does not name the limit: %v", le)
	}
	// The pool replaces the worker.
	if got, err := do(t, p, "echo", "after", 0); err != nil || got != "after" {
		t.Fatalf("echo after the limit = %q, %v", got, err)
	}
	// An allocation within the budget passes.
	if got, err := do(t, p, "alloc", strconv.Itoa(16<<20), 0); err != nil || got != "allocated" {
		t.Fatalf("alloc 16 MiB = %q, %v", got, err)
	}
}

func TestDoublingStopsAtTheMemoryLimit(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := do(t, p, "double", "", time.Hour)
	wantLimit(t, err, "memory")
}

// TestCPULimit stops a loop that never yields, by its CPU time.
func TestCPULimit(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := do(t, p, "spin", "", 100*time.Millisecond)
	wantLimit(t, err, "cpu")
	if got, err := do(t, p, "echo", "after", 0); err != nil || got != "after" {
		t.Fatalf("echo after the limit = %q, %v", got, err)
	}
}

// TestDeadlineKillsTheWorker: when the caller gives up, the worker is
// killed, so its CPU stops for real.
func TestDeadlineKillsTheWorker(t *testing.T) {
	p := newTestPool(t, Options{Max: 1})
	fifo := t.TempDir() + "/pid"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.Do(ctx, Job{Handler: "tellAndSpin", Payload: []byte(fifo), CPU: time.Hour})
		done <- err
	}()
	// Opening the FIFO waits for the worker to write to it: the job is
	// running.
	pidText, err := os.ReadFile(fifo)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(pidText))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// Do killed and reaped it: the process no longer exists.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("worker %d still exists after its job was cancelled: kill(0) = %v", pid, err)
	}
}

func TestJobErrorsKeepTheWorker(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := do(t, p, "fail", "x", 0)
	var je *JobError
	if !errors.As(err, &je) || je.Message != "bad input: x" {
		t.Fatalf("err = %v, want the handler's error", err)
	}
	_, err = do(t, p, "panic", "", 0)
	if !errors.As(err, &je) || !strings.Contains(je.Message, "panicked: oops") {
		t.Fatalf("err = %v, want the panic as a job error", err)
	}
	_, err = do(t, p, "nope", "", 0)
	if !errors.As(err, &je) || !strings.Contains(je.Message, `no handler "nope"`) {
		t.Fatalf("err = %v, want an unknown handler error", err)
	}
	if n := p.Started(); n != 1 {
		t.Errorf("started %d workers, want 1: job errors must not end a worker", n)
	}
}

func TestCrash(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := do(t, p, "exit", "", 0)
	var ce *CrashError
	if !errors.As(err, &ce) || !strings.Contains(ce.Detail, "exit status 7") {
		t.Fatalf("err = %v, want a crash with exit status 7", err)
	}
}

func TestReplyLimit(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := p.Do(t.Context(), Job{Handler: "big", Payload: []byte("2000000"), MaxReply: 1 << 20})
	var ce *CrashError
	if !errors.As(err, &ce) || !strings.Contains(ce.Detail, "more than the limit of 1048576") {
		t.Fatalf("err = %v, want the reply limit", err)
	}
	out, err := p.Do(t.Context(), Job{Handler: "big", Payload: []byte("1000"), MaxReply: 1 << 20})
	if err != nil || len(out) != 1000 {
		t.Fatalf("a reply under the limit: %d bytes, %v", len(out), err)
	}
}

// TestMinimalEnvironment: nothing of the server's environment reaches a
// worker.
func TestMinimalEnvironment(t *testing.T) {
	t.Setenv("ORCHESTRA_TEST_SECRET", "hunter2")
	p := newTestPool(t, Options{})
	env, err := do(t, p, "env", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(env, "hunter2") {
		t.Errorf("the worker inherited a secret:\n%s", env)
	}
	for _, kv := range strings.Split(env, "\n") {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case envChild, envMemory, "GOMAXPROCS", "GOTRACEBACK", "GORACE":
		default:
			t.Errorf("unexpected variable in the worker's environment: %s", kv)
		}
	}
}

func TestConcurrentJobsShareBoundedWorkers(t *testing.T) {
	p := newTestPool(t, Options{Max: 2})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			got, err := do(t, p, "echo", strconv.Itoa(i), 0)
			if err != nil || got != strconv.Itoa(i) {
				t.Errorf("echo %d = %q, %v", i, got, err)
			}
		})
	}
	wg.Wait()
	if n := p.Started(); n > 2 {
		t.Errorf("started %d workers, want at most 2", n)
	}
}

func TestClose(t *testing.T) {
	p := newTestPool(t, Options{})
	pidText, err := do(t, p, "pid", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(pidText)
	p.Close()
	if _, err := do(t, p, "echo", "", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("idle worker %d still exists after Close", pid)
	}
}

// TestPerKeyShare: the jobs of one key hold at most MaxPerKey workers, so
// another caller finds one free; a slot that frees goes to the oldest
// waiting job that may take it.
func TestPerKeyShare(t *testing.T) {
	p := NewPool(Options{Max: 2, MaxPerKey: 1})
	ctx := t.Context()
	if err := p.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { second <- p.acquire(ctx, "a") }()
	// b gets the second slot whenever a's second job asked: a is at its share.
	if err := p.acquire(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		t.Fatalf("a's second job got a slot past its share (%v)", err)
	default:
	}
	p.release("b")
	select {
	case err := <-second:
		t.Fatalf("a's second job got b's slot while a holds its share (%v)", err)
	default:
	}
	p.release("a")
	if err := <-second; err != nil {
		t.Fatalf("a's second job: %v", err)
	}
	// The empty key has no share.
	if err := p.acquire(ctx, ""); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.acquire(cctx, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("a job with the pool full and its context done: %v", err)
	}
	p.release("")
	p.release("a")
	if p.running != 0 || len(p.byKey) != 0 || len(p.waiting) != 0 {
		t.Errorf("the pool keeps state after every job ended: running %d, by key %v, %d waiting", p.running, p.byKey, len(p.waiting))
	}
}

// TestLongJobRetires: a job past longJob of CPU ends its worker (it ran at
// the lowest priority, which it cannot raise again); short jobs keep it.
func TestLongJobRetires(t *testing.T) {
	p := newTestPool(t, Options{Max: 1})
	first, _ := do(t, p, "pid", "", 0)
	if got, err := do(t, p, "long", "", time.Second); err != nil || got != "done" {
		t.Fatalf("long = %q, %v", got, err)
	}
	after, _ := do(t, p, "pid", "", 0)
	if first == after || p.Started() != 2 {
		t.Errorf("the worker that ran long served again (pid %s, then %s; %d started)", first, after, p.Started())
	}
}

// TestCPUAtTheMemoryBudgetIsMemory: a job whose live heap is over half
// its budget when its CPU time runs out ran out of memory, not of CPU:
// the collector runs as often as the memory limit makes it, and whether
// an allocation fails first depends on how its work was scheduled.
func TestCPUAtTheMemoryBudgetIsMemory(t *testing.T) {
	p := newTestPool(t, Options{})
	// Enough CPU time to build the heap, too little to reach the kernel's
	// refusal most times: the race detector makes allocations slower.
	cpu := 100 * time.Millisecond
	if raceFactor > 1 {
		cpu = 400 * time.Millisecond
	}
	for range 4 {
		_, err := do(t, p, "hold", strconv.Itoa(44<<20), cpu)
		wantLimit(t, err, "memory")
		if le := err.(*LimitError); le.Bytes != 64<<20 {
			t.Errorf("the error names %d bytes, want the budget", le.Bytes)
		}
	}
	// With a live heap well under the budget, it is the CPU.
	_, err := do(t, p, "hold", strconv.Itoa(8<<20), cpu)
	wantLimit(t, err, "cpu")
	_, err = do(t, p, "spin", "", 100*time.Millisecond)
	wantLimit(t, err, "cpu")
}

// TestBigJobRetiresItsWorker: the Go runtime keeps the address space a
// job's heap grew to, and what of it the next job can use depends on how
// the job left it; a worker whose job grew its heap by more than half its
// budget retires, so that the next job has its whole budget. Smaller jobs
// keep their worker.
func TestBigJobRetiresItsWorker(t *testing.T) {
	p := newTestPool(t, Options{Max: 1})
	pid := func() string {
		t.Helper()
		got, err := do(t, p, "pid", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := pid()
	for range 3 {
		if _, err := do(t, p, "steps", "4", 0); err != nil {
			t.Fatal(err)
		}
	}
	if again := pid(); again != first || p.Started() != 1 {
		t.Fatalf("small jobs ended their worker (pid %s, then %s; %d started)", first, again, p.Started())
	}
	// 1 + 2 + ... + 32 MiB, each allocated while the one before is live.
	if got, err := do(t, p, "steps", "32", 0); err != nil || got != strconv.Itoa(32<<20) {
		t.Fatalf("steps 32 = %q, %v", got, err)
	}
	if after := pid(); after == first || p.Started() != 2 {
		t.Errorf("the worker whose job grew its heap to 63 MiB served again (pid %s, then %s; %d started)", first, after, p.Started())
	}
}

// TestAWorkerStartsNoWorker: in a process started as a worker (whose
// program did not serve at start, and so runs as itself), a pool refuses
// to start workers rather than starting copies that would do the same.
func TestAWorkerStartsNoWorker(t *testing.T) {
	t.Setenv(envChild, "1")
	p := NewPool(Options{Max: 1})
	defer p.Close()
	_, err := p.Do(t.Context(), Job{Handler: "echo", Payload: []byte("x"), CPU: time.Second})
	if err == nil || !strings.Contains(err.Error(), "is a worker itself") {
		t.Fatalf("Do in a worker: %v; want a refusal that says this process is a worker", err)
	}
	if n := p.Started(); n != 0 {
		t.Errorf("%d workers started", n)
	}
}
