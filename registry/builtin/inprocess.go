package builtin

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/worker"
)

// evalInProcess runs f in this process, for platforms where workers are
// not supported. It is a weaker guard than a worker: the timeout is wall
// time, the memory bound is a heap watcher that samples the whole
// process (one allocation can pass it, and a concurrent evaluation can be
// blamed), and an evaluation that does not look at its context runs on
// after its caller gave up. Its errors have the types of worker.Pool.Do's.
func evalInProcess(ctx context.Context, f evalFunc, timeout time.Duration, memory int64, payload []byte) ([]byte, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		reply []byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		// A panic here would escape Invoke's recover, which guards only
		// the calling goroutine.
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: fmt.Errorf("the evaluation panicked: %v", v)}
			}
		}()
		reply, err := f(runCtx, payload)
		done <- result{reply, err}
	}()
	overMemory := watchHeap(runCtx, memory, cancel)
	var r result
	select {
	case r = <-done:
	case <-runCtx.Done():
		r.err = runCtx.Err()
	}
	switch {
	case overMemory():
		return nil, &worker.LimitError{Limit: "memory", Bytes: memory}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return nil, &worker.LimitError{Limit: "cpu", CPU: timeout}
	case r.err != nil:
		return nil, &worker.JobError{Message: r.err.Error()}
	}
	return r.reply, nil
}

// heapBytes reads the bytes of live and not yet swept heap objects.
func heapBytes() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// heapWatchEvery is how often watchHeap samples the heap.
const heapWatchEvery = 5 * time.Millisecond

// watchHeap calls stop when the heap grows by more than limit bytes before
// ctx is done. The heap is the whole process's, so the bound is a guard
// against programs that explode, not an exact account. The returned func
// reports whether stop was called for that reason.
func watchHeap(ctx context.Context, limit int64, stop func()) func() bool {
	var over atomic.Bool
	if limit <= 0 {
		return over.Load
	}
	base := heapBytes()
	go func() {
		t := time.NewTicker(heapWatchEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if now := heapBytes(); now > base && now-base > uint64(limit) {
					over.Store(true)
					stop()
					return
				}
			}
		}
	}()
	return over.Load
}
