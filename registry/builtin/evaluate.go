package builtin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/worker"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// evalFunc is an evaluation of json_query or render: a job in, a reply
// out, both encoded by the tool. An error is a problem the model can fix.
type evalFunc func(ctx context.Context, payload []byte) ([]byte, error)

// maxEvalError is room in an evaluator's reply for an error message; a
// worker cuts longer ones.
const maxEvalError = worker.MaxErrorBytes

// evalFuncs are the evaluations that run in worker processes.
var evalFuncs = map[string]evalFunc{
	"json_query": evalJSONQuery,
	"render":     evalRender,
}

// ServeWorker serves evaluations, and exits, when this process was started
// as an evaluation worker by [Workers]; otherwise it returns at once. A
// worker is a copy of the running program: a program whose json_query and
// render evaluate in workers calls it first thing in main, and so do the
// tests of such a program, in TestMain.
func ServeWorker() {
	if !worker.IsChild() {
		return
	}
	handlers := map[string]worker.Handler{}
	for name, f := range evalFuncs {
		handlers[name] = func(p []byte) ([]byte, error) { return f(context.Background(), p) }
	}
	worker.Serve(handlers)
}

// evaluator runs evaluations where their memory and CPU can be bounded: in
// worker processes with an address-space limit, which die of their limit
// and are killed at their deadline. Where the platform cannot bound a
// worker's memory (see worker.Supported), evaluations run in this process
// instead, with a weaker guard: a heap watcher and a wall-clock timeout
// that the evaluation may outlive.
type evaluator struct {
	pool   *worker.Pool // nil: in this process
	memory int64
}

// newEvaluator returns an evaluator within memory bytes, in a pool of w
// with at most workers workers.
func newEvaluator(memory int64, workers int, w *Workers) *evaluator {
	ev := &evaluator{memory: memory}
	if worker.Supported {
		ev.pool = w.pool(memory, workers)
	}
	return ev
}

// run evaluates payload with the evaluation called name, within cpu of CPU
// time. Its errors are those of worker.Pool.Do.
func (ev *evaluator) run(ctx context.Context, name string, cpu time.Duration, payload []byte, maxReply int) ([]byte, error) {
	if ev.pool != nil {
		return ev.pool.Do(ctx, worker.Job{Handler: name, Payload: payload, CPU: cpu, MaxReply: maxReply, Key: caller(ctx)})
	}
	return evalInProcess(ctx, evalFuncs[name], cpu, ev.memory, payload)
}

// caller names whom an evaluation is for, so that the pool shares its
// workers fairly: the authenticated user, else the client's session.
func caller(ctx context.Context) string {
	ids, _ := toolcontext.IDsFrom(ctx)
	if ids.Owner != "" {
		return "owner:" + ids.Owner
	}
	if ids.ContextID != "" {
		return "session:" + ids.ContextID
	}
	return ""
}

// Workers are the worker processes json_query and render evaluate in: one
// pool for each memory budget and size, shared by the tools made with them
// (see [Options]). Idle workers end after a minute; Close ends them at
// once. The zero value is ready to use, and Workers are safe for
// concurrent use.
type Workers struct {
	mu    sync.Mutex
	pools map[[2]int64]*worker.Pool
}

// pool returns the pool for memory bytes and at most workers workers.
func (w *Workers) pool(memory int64, workers int) *worker.Pool {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := [2]int64{memory, int64(workers)}
	if p, ok := w.pools[key]; ok {
		return p
	}
	if w.pools == nil {
		w.pools = map[[2]int64]*worker.Pool{}
	}
	p := worker.NewPool(worker.Options{Max: workers, MemoryBytes: memory})
	w.pools[key] = p
	return p
}

// Close ends the idle workers; the tools made with w evaluate no more
// (their calls fail with worker.ErrClosed).
func (w *Workers) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pools {
		p.Close()
	}
	return nil
}

// evalFailure turns an evaluator's error into the tool's: the limits and
// the program's own errors are tool errors the model can act on; the
// caller's cancellation is returned as it is.
func evalFailure(ctx context.Context, tool string, err error, memoryHint, cpuHint string) error {
	var (
		limit *worker.LimitError
		job   *worker.JobError
		crash *worker.CrashError
	)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", tool, ctx.Err())
	case errors.As(err, &limit) && limit.Limit == "memory":
		return argErrorf("%s: %s", tool, fmt.Sprintf(memoryHint, formatBytes(limit.Bytes)))
	case errors.As(err, &limit):
		return argErrorf("%s: %s", tool, fmt.Sprintf(cpuHint, limit.CPU))
	case errors.As(err, &job):
		return &argError{job.Message}
	case errors.As(err, &crash):
		return fmt.Errorf("%s: %w", tool, crash)
	}
	return fmt.Errorf("%s: %w", tool, err)
}
