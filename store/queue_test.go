package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// fakeWrite is a write for the queue alone; the queue never applies it.
type fakeWrite string

func (w fakeWrite) String() string                                    { return string(w) }
func (w fakeWrite) execID() string                                    { return string(w) }
func (w fakeWrite) encode() error                                     { return nil }
func (w fakeWrite) apply(context.Context, *sql.Tx, *statements) error { return nil }

// pushAsync pushes w on a goroutine and returns where its result arrives.
func pushAsync(ctx context.Context, q *queue, w write) <-chan error {
	res := make(chan error, 1)
	go func() { res <- q.push(ctx, w, nil) }()
	return res
}

func TestQueueFullPushWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueue(2)
		for _, w := range []fakeWrite{"a", "b"} {
			if err := q.push(ctx, w, nil); err != nil {
				t.Fatal(err)
			}
		}
		third := pushAsync(ctx, q, fakeWrite("c"))
		synctest.Wait()
		select {
		case err := <-third:
			t.Fatalf("push on a full queue returned %v without waiting", err)
		default:
		}

		batch, ok := q.take()
		if !ok || len(batch) != 2 || batch[0].w != fakeWrite("a") || batch[1].w != fakeWrite("b") {
			t.Fatalf("take = %v, %v; want a and b in order", batch, ok)
		}
		synctest.Wait()
		select {
		case <-third:
			t.Fatal("push returned before the writes ahead of it were applied")
		default:
		}
		q.finish(batch) // frees their room
		if err := <-third; err != nil {
			t.Fatalf("push after room was made = %v", err)
		}
		if batch, _ := q.take(); len(batch) != 1 || batch[0].w != fakeWrite("c") || batch[0].seq != 3 {
			t.Fatalf("take = %v, want c as the third write", batch)
		}
	})
}

func TestQueueFullPushGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1)
		if err := q.push(t.Context(), fakeWrite("a"), nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		res := pushAsync(ctx, q, fakeWrite("b"))
		synctest.Wait()
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled push = %v, want context.Canceled", err)
		}
		if got := q.queuedSoFar(); got != 1 {
			t.Fatalf("%d writes queued, want 1: a cancelled push queues nothing", got)
		}
	})
}

func TestQueueClosedWhileFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueue(1)
		if err := q.push(ctx, fakeWrite("a"), nil); err != nil {
			t.Fatal(err)
		}
		late := pushAsync(ctx, q, fakeWrite("b"))
		synctest.Wait()
		q.close()
		// The writer drains what was queued before close, and only that.
		batch, ok := q.take()
		if !ok || len(batch) != 1 {
			t.Fatalf("take after close = %v, %v; want a", batch, ok)
		}
		q.finish(batch)
		if err := <-late; !errors.Is(err, ErrClosed) {
			t.Fatalf("push waiting on a closed queue = %v, want ErrClosed", err)
		}
		if batch, ok := q.take(); ok {
			t.Fatalf("take on a closed, drained queue = %v, true", batch)
		}
	})
}

func TestQueueWaitForWritesBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueue(8)
		if err := q.push(ctx, fakeWrite("a"), nil); err != nil {
			t.Fatal(err)
		}
		upTo := q.queuedSoFar()
		waited := make(chan error, 1)
		go func() { waited <- q.wait(ctx, upTo) }()

		first, _ := q.take()
		if err := q.push(ctx, fakeWrite("b"), nil); err != nil { // queued after the wait began
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("wait returned before a was applied")
		default:
		}
		q.finish(first)
		if err := <-waited; err != nil {
			t.Fatalf("wait = %v, want nil once a is applied, with b still pending", err)
		}

		ctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() { res <- q.wait(ctx, q.queuedSoFar()) }()
		synctest.Wait()
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait = %v, want context.Canceled", err)
		}
	})
}

// TestQueueLinger checks the writer's wait for more writes: the whole delay
// when nobody waits for the writes, none for a synchronous write, and only
// until a reader starts waiting.
func TestQueueLinger(t *testing.T) {
	const d = 2 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueue(16)
		if err := q.push(ctx, fakeWrite("a"), nil); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		q.linger(d)
		if got := time.Since(start); got != d {
			t.Errorf("with nobody waiting, linger took %v, want %v", got, d)
		}
		q.finish(mustTake(t, q))

		// A synchronous write does not wait.
		res := make(chan error, 1)
		if err := q.push(ctx, fakeWrite("b"), res); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		q.linger(d)
		if got := time.Since(start); got != 0 {
			t.Errorf("with a synchronous write pending, linger took %v, want 0", got)
		}
		q.finish(mustTake(t, q))

		// A reader that starts waiting ends the linger.
		if err := q.push(ctx, fakeWrite("c"), nil); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		lingered := make(chan time.Duration)
		go func() {
			q.linger(d)
			lingered <- time.Since(start)
		}()
		time.Sleep(d / 4)
		waited := make(chan error, 1)
		go func() { waited <- q.wait(ctx, q.queuedSoFar()) }()
		if got := <-lingered; got != d/4 {
			t.Errorf("linger took %v; a reader began waiting after %v and should have ended it", got, d/4)
		}
		q.finish(mustTake(t, q))
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
	})
}

func mustTake(t *testing.T, q *queue) []queued {
	t.Helper()
	batch, ok := q.take()
	if !ok || len(batch) == 0 {
		t.Fatal("nothing to take")
	}
	return batch
}
