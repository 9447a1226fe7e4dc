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

// A program built with this package is its own worker: started as one, it
// serves evaluations before anything else of the program runs.
func init() {
	if worker.IsChild() {
		handlers := map[string]worker.Handler{}
		for name, f := range evalFuncs {
			handlers[name] = func(p []byte) ([]byte, error) { return f(context.Background(), p) }
		}
		worker.Serve(handlers)
	}
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

func newEvaluator(memory int64, workers int) *evaluator {
	ev := &evaluator{memory: memory}
	if worker.Supported {
		ev.pool = sharedPool(memory, workers)
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

// pools holds the process's worker pools, one for each memory budget and
// size: the tools of every App in the process share them, and their
// workers end when idle.
var pools struct {
	mu sync.Mutex
	m  map[[2]int64]*worker.Pool
}

func sharedPool(memory int64, workers int) *worker.Pool {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	key := [2]int64{memory, int64(workers)}
	if p, ok := pools.m[key]; ok {
		return p
	}
	if pools.m == nil {
		pools.m = map[[2]int64]*worker.Pool{}
	}
	p := worker.NewPool(worker.Options{Max: workers, MemoryBytes: memory})
	pools.m[key] = p
	return p
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
