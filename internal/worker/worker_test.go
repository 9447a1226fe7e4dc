//go:build linux

package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	// live, up to the number of MiB in its payload, and answers the size
	// of the last and the CPU time it used.
	"steps": func(p []byte) ([]byte, error) {
		start := cpuTime()
		n, _ := strconv.Atoi(string(p))
		var b []byte
		for size := 1 << 20; size <= n<<20; size *= 2 {
			c := make([]byte, size)
			copy(c, b)
			b = c
		}
		return fmt.Appendf(nil, "%d %d", len(b), cpuTime()-start), nil
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
	// hold keeps a heap live, in small objects the collector must trace,
	// and allocates garbage forever: with the live heap at the memory
	// limit, the collector runs without end and the job never gets past
	// it. Its payload is a heapJob's.
	"hold": func(p []byte) ([]byte, error) {
		start := cpuTime()
		job := readHeapJob(p)
		live := buildList(job.size)
		if err := job.built(start); err != nil {
			return nil, err
		}
		for {
			sink = make([]byte, 1<<10)
			if live == nil {
				break
			}
		}
		return nil, nil
	},
	// letGo builds a heap as hold does, has the collector measure it,
	// lets it go and loops without allocating: its live heap was large
	// once, and is small when its CPU time runs out. Its payload is a
	// heapJob's.
	"letGo": func(p []byte) ([]byte, error) {
		start := cpuTime()
		job := readHeapJob(p)
		buildAndLetGo(job.size)
		if err := job.built(start); err != nil {
			return nil, err
		}
		for {
		}
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

type node struct {
	next *node
	pad  [48]byte
}

// buildList returns a list of small objects that take n bytes.
func buildList(n int) *node {
	var live *node
	for range n / 64 {
		live = &node{next: live}
	}
	return live
}

// buildAndLetGo builds a list of n bytes, has the collector measure it,
// and lets it go, unlinking its nodes: a stale copy of a pointer to one
// of them, which the collector can find in the registers of a goroutine
// it stopped in a loop (it scans those conservatively), keeps that node
// alone alive.
func buildAndLetGo(n int) {
	live := buildList(n)
	runtime.GC()
	for live != nil {
		live, live.next = live.next, nil
	}
}

// heapJob is the payload of hold and letGo, "size file cpu": the bytes
// of heap to build, the file to write once it is built, and the job's CPU
// time, in nanoseconds.
type heapJob struct {
	size int
	file string
	cpu  time.Duration
}

func (j heapJob) String() string { return fmt.Sprintf("%d %s %d", j.size, j.file, j.cpu) }

func readHeapJob(p []byte) heapJob {
	var j heapJob
	fmt.Sscan(string(p), &j.size, &j.file, &j.cpu)
	return j
}

// built writes the job's file if the job, which started at start, has
// used less than nine tenths of its CPU time: the watchdog has not yet
// found it used up, so that it measures the heap as the job has built it.
func (j heapJob) built(start time.Duration) error {
	if cpuTime()-start >= j.cpu*9/10 {
		return nil
	}
	return os.WriteFile(j.file, nil, 0o600)
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
	cpu := 100 * time.Millisecond
	for range 4 {
		var err error
		cpu, err = untilBuilt(t, p, "hold", 44<<20, cpu)
		wantLimit(t, err, "memory")
		if le := err.(*LimitError); le.Bytes != 64<<20 {
			t.Errorf("the error names %d bytes, want the budget", le.Bytes)
		}
	}
	// With a live heap well under the budget, it is the CPU. (Its own
	// CPU time, short: the runtime lets a heap outgrow its memory limit
	// when the collector has had more than half the CPU for a second,
	// and a job allocating garbage that long can die of it.)
	_, err := untilBuilt(t, p, "hold", 8<<20, 100*time.Millisecond)
	wantLimit(t, err, "cpu")
	_, err = do(t, p, "spin", "", 100*time.Millisecond)
	wantLimit(t, err, "cpu")
}

// TestLetGoIsNotMemory: a job that built a large value, let it go, and
// ran out of CPU time in a loop that does not allocate ran out of CPU,
// though the collector's last measure, taken while the value was live, was
// over half its budget.
func TestLetGoIsNotMemory(t *testing.T) {
	p := newTestPool(t, Options{})
	_, err := untilBuilt(t, p, "letGo", 44<<20, 100*time.Millisecond)
	wantLimit(t, err, "cpu")
}

// untilBuilt runs handler (hold or letGo) with a heap of size bytes and a
// CPU time of cpu, doubled until the job had built its heap well before
// its CPU time ran out (how much CPU building it takes depends on the
// machine and its load; until then, what stopped the job says nothing),
// and returns the CPU time the job had and its error.
func untilBuilt(t *testing.T, p *Pool, handler string, size int, cpu time.Duration) (time.Duration, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "built")
	for ; ; cpu *= 2 {
		_, err := do(t, p, handler, heapJob{size, file, cpu}.String(), cpu)
		if _, statErr := os.Stat(file); statErr == nil {
			return cpu, err
		}
		if cpu >= 30*time.Second {
			t.Fatalf("%s did not build a heap of %d bytes in %s of CPU time: %v", handler, size, cpu, err)
		}
	}
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
	steps := func(mib int) (size int, used time.Duration) {
		t.Helper()
		got, err := do(t, p, "steps", strconv.Itoa(mib), time.Minute)
		if err != nil {
			t.Fatalf("steps %d: %v", mib, err)
		}
		if _, err := fmt.Sscan(got, &size, &used); err != nil {
			t.Fatalf("steps %d = %q: %v", mib, got, err)
		}
		return size, used
	}
	// A job that ran long retires its worker too, and the page faults of
	// a growing heap can take that much CPU time on a slow machine or
	// under the race detector: the small jobs that stayed well short of
	// it must keep theirs.
	checked := 0
	for range 3 {
		before := pid()
		if _, used := steps(2); used < longJob*4/5 {
			checked++
			if after := pid(); after != before {
				t.Fatalf("a small job (%s of CPU time) ended its worker (pid %s, then %s)", used, before, after)
			}
		}
	}
	if checked == 0 {
		t.Logf("every small job took %s of CPU time or more: none showed that small jobs keep their worker", longJob*4/5)
	}
	// 1 + 2 + ... + 32 MiB, each allocated while the one before is live.
	before, started := pid(), p.Started()
	if size, _ := steps(32); size != 32<<20 {
		t.Fatalf("steps 32 made %d bytes", size)
	}
	if after := pid(); after == before || p.Started() != started+1 {
		t.Errorf("the worker whose job grew its heap to 63 MiB served again (pid %s, then %s; %d started)", before, after, p.Started()-started)
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
