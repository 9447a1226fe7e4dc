package store

import (
	"context"
	"sync"
	"time"
)

// queueSize bounds the writes waiting for the writer, and being applied by
// it: beyond it, queuing a write waits for room.
const queueSize = 1024

// queued is a write in the queue.
type queued struct {
	w   write
	seq uint64     // the write's place in the queue, from 1
	res chan error // receives the write's error when a caller waits for it; nil otherwise
}

// queue is the bounded FIFO between the callers that record runs and the
// store's one writer goroutine. Every write takes a sequence number; the
// writer takes all pending writes at once, applies them and marks them
// done, which lets a reader wait for exactly the writes queued before it.
type queue struct {
	slots chan struct{} // one token per write queued or being applied
	wake  chan struct{} // tells the writer writes are pending
	hurry chan struct{} // cuts the writer's linger short: someone waits for the writes

	mu      sync.Mutex
	pending []queued
	last    uint64        // the sequence number of the last write queued
	done    uint64        // every write up to this one is applied
	moved   chan struct{} // closed, and replaced, when done advances
	waiters int           // callers waiting in wait, for tests
	closed  bool
}

func newQueue(size int) *queue {
	return &queue{
		slots: make(chan struct{}, size),
		wake:  make(chan struct{}, 1),
		hurry: make(chan struct{}, 1),
		moved: make(chan struct{}),
	}
}

// push queues w. When the queue is full it waits for room until ctx is
// done, and returns ctx's error then; after close it returns [ErrClosed].
// res, when not nil, receives w's error once it is applied.
func (q *queue) push(ctx context.Context, w write, res chan error) error {
	select {
	case q.slots <- struct{}{}:
	default:
		// Full: wait for the writer to make room, or for the caller to give up.
		// The writer drains everything before it exits, so a closed queue
		// always makes room for the waiters to see that it is closed.
		select {
		case q.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		<-q.slots
		return ErrClosed
	}
	q.last++
	q.pending = append(q.pending, queued{w: w, seq: q.last, res: res})
	urgent := res != nil || len(q.pending) >= lingerMax
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // the writer is awake already
	}
	if urgent {
		q.hasten()
	}
	return nil
}

// lingerMax is the number of pending writes that ends a linger.
const lingerMax = 256

// hasten ends the writer's linger, or the next one.
func (q *queue) hasten() {
	select {
	case q.hurry <- struct{}{}:
	default:
	}
}

// await waits until writes are pending. It returns false once the queue is
// closed and nothing is left.
func (q *queue) await() bool {
	for {
		q.mu.Lock()
		n, closed := len(q.pending), q.closed
		q.mu.Unlock()
		if n > 0 {
			return true
		}
		if closed {
			return false
		}
		<-q.wake
	}
}

// linger waits up to d for more writes to join those pending, so that
// they share a transaction: the writes of a run come one by one (its
// start, each step as it starts and ends, its finish) and, taken together,
// fold into fewer statements. It returns at once when someone waits for
// the writes: a read, a caller of a synchronous write, Close, or a full
// batch.
func (q *queue) linger(d time.Duration) {
	// A signal left from before is stale: whoever sent it is counted below
	// if it still waits. Anyone who starts waiting later signals again.
	select {
	case <-q.hurry:
	default:
	}
	q.mu.Lock()
	urgent := q.waiters > 0 || q.closed || len(q.pending) >= lingerMax
	for _, p := range q.pending {
		urgent = urgent || p.res != nil
	}
	q.mu.Unlock()
	if urgent || d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.hurry:
	}
}

// take waits until writes are pending and returns them all, oldest first.
// After close it returns what is left, then ok=false once nothing is.
func (q *queue) take() (batch []queued, ok bool) {
	for {
		q.mu.Lock()
		batch, q.pending = q.pending, nil
		closed := q.closed
		q.mu.Unlock()
		if len(batch) > 0 {
			return batch, true
		}
		if closed {
			return nil, false
		}
		<-q.wake
	}
}

// finish marks the writes of a batch take returned as applied: their
// waiters in wait return, and their room in the queue is free again.
func (q *queue) finish(batch []queued) {
	if len(batch) == 0 {
		return
	}
	q.mu.Lock()
	q.done = batch[len(batch)-1].seq
	close(q.moved)
	q.moved = make(chan struct{})
	q.mu.Unlock()
	for range batch {
		<-q.slots
	}
}

// queuedSoFar returns the sequence number of the last write queued.
func (q *queue) queuedSoFar() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.last
}

// wait waits until every write up to seq is applied, or ctx is done.
func (q *queue) wait(ctx context.Context, seq uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.done < seq {
		moved := q.moved
		q.waiters++
		q.mu.Unlock()
		q.hasten()
		var err error
		select {
		case <-moved:
		case <-ctx.Done():
			err = ctx.Err()
		}
		q.mu.Lock()
		q.waiters--
		if err != nil {
			return err
		}
	}
	return nil
}

// close refuses new writes; the writer drains those already queued.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	q.hasten()
}
