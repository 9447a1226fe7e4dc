package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Pool. The zero value is usable.
type Options struct {
	// Max is how many workers may run at once; a job beyond them waits
	// for one to be free. Default 4.
	Max int
	// MaxPerKey is how many of them the jobs of one Job.Key may hold at
	// once, so that one caller cannot take every worker. Default Max-1
	// (at least 1).
	MaxPerKey int
	// MemoryBytes is each worker's memory budget: how far its address
	// space may grow beyond what it had at start (plus some room for the
	// Go runtime), and its GOMEMLIMIT. Default 128 MiB.
	MemoryBytes int64
	// IdleTimeout ends a worker that has had no job for this long.
	// Default one minute.
	IdleTimeout time.Duration
	// Executable is the program started as a worker; default the running
	// one (/proc/self/exe), which must call Serve at start (first thing
	// in main, and in TestMain for tests) when IsChild reports true.
	Executable string
}

// Defaults of Options' zero fields.
const (
	DefaultMax         = 4
	DefaultMemoryBytes = 128 << 20
	DefaultIdleTimeout = time.Minute
)

func (o Options) withDefaults() Options {
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.MaxPerKey <= 0 || o.MaxPerKey > o.Max {
		o.MaxPerKey = max(1, o.Max-1)
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	return o
}

// A Pool runs jobs in worker processes, one job per worker at a time. It
// is safe for concurrent use.
type Pool struct {
	opts Options

	mu      sync.Mutex
	idle    []*proc
	closed  bool
	started int // workers started, for tests and metrics

	running int            // jobs holding a slot
	byKey   map[string]int // of them, by Job.Key
	waiting []*waiter      // jobs waiting for a slot, oldest first
}

// waiter is a job waiting for a slot; ready is closed when it has one.
type waiter struct {
	key   string
	ready chan struct{}
}

// NewPool returns a pool; it starts no worker until a job needs one.
func NewPool(opts Options) *Pool {
	return &Pool{opts: opts.withDefaults(), byKey: map[string]int{}}
}

// canRun reports whether a job of key may take a slot now; p.mu is held.
func (p *Pool) canRun(key string) bool {
	return p.running < p.opts.Max && (key == "" || p.byKey[key] < p.opts.MaxPerKey)
}

func (p *Pool) take(key string) {
	p.running++
	p.byKey[key]++
}

// acquire waits for a slot for a job of key: the oldest waiting job that
// may run gets each slot that frees, so that a caller past its share does
// not hold up the others.
func (p *Pool) acquire(ctx context.Context, key string) error {
	p.mu.Lock()
	// Every waiting job is one that could not run when it came or since:
	// a slot that frees goes to them first (releaseLocked).
	if p.canRun(key) {
		p.take(key)
		p.mu.Unlock()
		return nil
	}
	w := &waiter{key: key, ready: make(chan struct{})}
	p.waiting = append(p.waiting, w)
	p.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			p.releaseLocked(key)
		default:
			p.waiting = slices.DeleteFunc(p.waiting, func(x *waiter) bool { return x == w })
		}
		return ctx.Err()
	}
}

func (p *Pool) release(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(key)
}

func (p *Pool) releaseLocked(key string) {
	p.running--
	if p.byKey[key]--; p.byKey[key] == 0 {
		delete(p.byKey, key)
	}
	for i := 0; i < len(p.waiting); {
		w := p.waiting[i]
		if !p.canRun(w.key) {
			i++
			continue
		}
		p.take(w.key)
		close(w.ready)
		p.waiting = slices.Delete(p.waiting, i, i+1)
	}
}

// MemoryBytes is each worker's memory budget.
func (p *Pool) MemoryBytes() int64 { return p.opts.MemoryBytes }

// Started returns how many worker processes the pool has started.
func (p *Pool) Started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Do runs job in a worker and returns its reply. It fails with a
// *LimitError when the job ran out of memory or CPU time, a *JobError when
// the handler failed, a *CrashError when the worker died otherwise, and
// ctx's error when ctx ended first, in which case the worker was killed.
// After a LimitError, a CrashError or ctx's end, no trace of the job is
// left running.
func (p *Pool) Do(ctx context.Context, job Job) ([]byte, error) {
	if !Supported {
		return nil, errors.New("workers are not supported on this platform")
	}
	if job.MaxReply <= 0 {
		job.MaxReply = DefaultMaxReply
	}
	if err := p.acquire(ctx, job.Key); err != nil {
		return nil, err
	}
	defer p.release(job.Key)
	w, err := p.get()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, w.kill)
	status, reply, err := w.do(job)
	if !stop() {
		// ctx ended: the worker is killed, whatever it answered.
		w.discard()
		return nil, ctx.Err()
	}
	if err != nil {
		w.kill()
		return nil, w.failure(err, job)
	}
	if status&replyRetiring != 0 {
		w.end() // it ran long at a low priority, or grew big, and will not serve again
	} else {
		p.put(w)
	}
	if status&^replyRetiring == replyErr {
		return nil, &JobError{Message: string(reply)}
	}
	return reply, nil
}

// get returns an idle worker or starts one.
func (p *Pool) get() (*proc, error) {
	if IsChild() {
		// A worker whose program did not serve at start runs the program
		// instead; if that started workers of its own, they would do the
		// same, each a copy more.
		return nil, errors.New("starting a worker: this process is a worker itself; its program must call Serve before anything else when IsChild reports true")
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if w.idleTimer.Stop() {
			p.mu.Unlock()
			return w, nil
		}
		// Its idle timer fired and is ending it.
	}
	p.started++
	p.mu.Unlock()
	return p.start()
}

// put makes w idle, or ends it when the pool is closed.
func (p *Pool) put(w *proc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		w.discard()
		return
	}
	p.idle = append(p.idle, w)
	if w.idleTimer == nil {
		w.idleTimer = time.AfterFunc(p.opts.IdleTimeout, func() { p.retire(w) })
	} else {
		w.idleTimer.Reset(p.opts.IdleTimeout)
	}
}

// retire ends w after its idle timer fired.
func (p *Pool) retire(w *proc) {
	p.mu.Lock()
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	w.end()
}

// Close ends the idle workers, and the busy ones when their job is done.
// Jobs after Close fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		if w.idleTimer.Stop() {
			w.end()
		}
	}
	return nil
}

// proc is one worker process.
type proc struct {
	cmd       *exec.Cmd
	in        *os.File      // the worker's stdin
	out       *bufio.Reader // its stdout
	outFile   *os.File
	stderr    *os.File // an unlinked file, read after it died
	budget    int64
	idleTimer *time.Timer // set while idle; guarded by the pool's mutex

	killOnce sync.Once
	waitOnce sync.Once
	waitErr  error
}

func (p *Pool) start() (*proc, error) {
	exe := p.opts.Executable
	if exe == "" {
		// The running program itself, even when its file was replaced
		// or removed since it started (an upgrade): workers run only
		// on Linux, where /proc/self/exe names it.
		exe = "/proc/self/exe"
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	// The worker's stderr is a file, not a pipe: it is read only after
	// the worker died, and a dying Go program writes more than a pipe
	// holds (a runtime error prints every goroutine whatever GOTRACEBACK
	// says), so a pipe nobody drains would hang it.
	errF, err := os.CreateTemp("", "orchestra-worker-*.stderr")
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	_ = os.Remove(errF.Name())
	cmd := exec.Command(exe)
	// Nothing of this process's environment: no secret can reach a
	// worker. One P, so that CPU time and wall time advance together; no
	// goroutine dump when it dies (its last words must fit the pipe).
	cmd.Env = []string{
		envChild + "=1",
		envMemory + "=" + strconv.FormatInt(p.opts.MemoryBytes, 10),
		"GOMAXPROCS=1",
		"GOTRACEBACK=none",
	}
	cmd.Env = append(cmd.Env, raceEnv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errF
	configure(cmd)
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errF.Close()
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	return &proc{cmd: cmd, in: inW, out: bufio.NewReaderSize(outR, 64<<10), outFile: outR, stderr: errF, budget: p.opts.MemoryBytes}, nil
}

// do sends job and reads the reply.
func (w *proc) do(job Job) (byte, []byte, error) {
	if err := writeRequest(w.in, job); err != nil {
		return 0, nil, err
	}
	return readReply(w.out, job.MaxReply)
}

// kill ends the worker at once.
func (w *proc) kill() {
	w.killOnce.Do(func() { _ = w.cmd.Process.Kill() })
}

// wait reaps the worker and releases its pipes.
func (w *proc) wait() error {
	w.waitOnce.Do(func() {
		w.waitErr = w.cmd.Wait()
		w.in.Close()
		w.outFile.Close()
	})
	return w.waitErr
}

// end asks the worker to exit by closing its stdin, and reaps it; one that
// does not exit within a few seconds is killed.
func (w *proc) end() {
	w.in.Close()
	t := time.AfterFunc(5*time.Second, w.kill)
	w.wait()
	t.Stop()
	w.stderr.Close()
}

// discard kills the worker and reaps it.
func (w *proc) discard() {
	w.kill()
	w.wait()
	w.stderr.Close()
}

// failure says why a worker stopped answering job: one of its limits, or
// a crash.
func (w *proc) failure(ioErr error, job Job) error {
	err := w.wait()
	last := w.lastWords()
	w.stderr.Close()
	var big *errReplyTooLarge
	if errors.As(ioErr, &big) {
		return &CrashError{Detail: big.Error()}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == exitCPU {
		cpu := job.CPU
		if cpu <= 0 {
			cpu = DefaultCPU
		}
		return &LimitError{Limit: "cpu", CPU: cpu}
	}
	if errors.As(err, &exit) && exit.ExitCode() == exitMemory || outOfMemory(last) {
		return &LimitError{Limit: "memory", Bytes: w.budget}
	}
	detail := "it stopped answering"
	if err != nil {
		detail = err.Error()
	}
	if last != "" {
		detail += ": " + last
	}
	return &CrashError{Detail: detail}
}

// lastWords reads how the dead worker explained its end: the first lines
// it wrote to stderr, before any goroutine dump.
func (w *proc) lastWords() string {
	data := make([]byte, 4096)
	n, _ := w.stderr.ReadAt(data, 0)
	var lines []string
	for line := range strings.SplitSeq(string(data[:n]), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "goroutine ") {
			break
		}
		lines = append(lines, line)
	}
	last := strings.Join(lines, "; ")
	if len(last) > 512 {
		last = last[:512]
	}
	return last
}

// outOfMemory reports whether a worker's last words say an allocation
// failed: the Go runtime's "out of memory" (or a thread it could not
// create for want of memory), or, in a race-detector build, the
// runtime's or the detector's own words for a refused mapping.
func outOfMemory(last string) bool {
	for _, s := range []string{"out of memory", "failed to allocate", "cannot allocate memory", "errno=12", "address space collisions for -race mode"} {
		if strings.Contains(last, s) {
			return true
		}
	}
	return false
}
