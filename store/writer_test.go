package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// holdWriter takes the writer's only connection, so that the writer
// goroutine cannot begin a transaction: writes queue up until the returned
// function gives the connection back.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	conn, err := s.writer.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { conn.Close() }) }
	t.Cleanup(release)
	return release
}

// queueRun queues the four writes of a one-step run, as the server's
// recorder does.
func queueRun(ctx context.Context, s *Store, id string, status Status) error {
	if err := s.QueueStartRun(ctx, Run{ExecID: id, Tool: "agent_orchestrate", StepCount: 1, Plan: json.RawMessage(`{"steps":[{"id":"a"}]}`)}); err != nil {
		return err
	}
	st := StepRecord{ExecID: id, StepID: "a", Tool: "echo", Status: "running", StartedAt: time.Now()}
	if err := s.QueueRecordStep(ctx, st); err != nil {
		return err
	}
	st.Status, st.Attempts, st.Output = string(status), 1, json.RawMessage(`{"text":"hi"}`)
	if err := s.QueueRecordStep(ctx, st); err != nil {
		return err
	}
	env := json.RawMessage(`{"artifact":{"status":"` + string(status) + `","errors":[]}}`)
	if status != StatusSuccess {
		env = json.RawMessage(`{"artifact":{"status":"` + string(status) + `","errors":[{"code":"tool_error","message":"boom"}]}}`)
	}
	return s.QueueFinishRun(ctx, id, status, env, time.Time{}, 0)
}

// waitForReader waits until a read is waiting for the queue, and fails if
// the read returned first: without waiting for the queued writes.
func waitForReader(t *testing.T, s *Store, returned <-chan struct{}) {
	t.Helper()
	for {
		s.q.mu.Lock()
		n := s.q.waiters
		s.q.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-returned:
			t.Fatal("the read returned before the writes queued ahead of it were applied")
		default:
			runtime.Gosched()
		}
	}
}

// TestReadsWaitForQueuedWrites queues whole runs while the writer cannot
// write, then reads: Get, List and Stats wait for the writes queued before
// them and see every run complete. The database is on disk, where reads
// have connections of their own: in memory they share the writer's.
func TestReadsWaitForQueuedWrites(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, tempDB(t), Options{})
	for _, read := range []struct {
		name  string
		check func(t *testing.T, id string)
	}{
		{"get", func(t *testing.T, id string) {
			run, steps, err := s.Get(ctx, id)
			if err != nil {
				t.Error(err) // on the reading goroutine
				return
			}
			if run.Status != StatusFailed || run.Error != "tool_error: boom" || run.FinishedAt.IsZero() {
				t.Errorf("run %+v, want failed with its error", run)
			}
			if len(steps) != 1 || steps[0].Status != "failed" || string(steps[0].Output) != `{"text":"hi"}` {
				t.Errorf("steps %+v, want one failed", steps)
			}
		}},
		{"list", func(t *testing.T, id string) {
			runs, _, err := s.List(ctx, ListOptions{Limit: 1})
			if err != nil {
				t.Error(err) // on the reading goroutine
				return
			}
			if len(runs) != 1 || runs[0].ExecID != id || runs[0].Status != StatusFailed {
				t.Errorf("List = %+v, want %s failed", runs, id)
			}
		}},
		{"stats", func(t *testing.T, id string) {
			st, err := s.Stats(ctx)
			if err != nil {
				t.Error(err) // on the reading goroutine
				return
			}
			if st.Runs[StatusRunning] != 0 || st.Runs[StatusFailed] == 0 {
				t.Errorf("Stats.Runs = %v, want none running", st.Runs)
			}
		}},
	} {
		t.Run(read.name, func(t *testing.T) {
			id := "read-" + read.name
			release := holdWriter(t, s)
			if err := queueRun(ctx, s, id, StatusFailed); err != nil {
				t.Fatal(err)
			}
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				read.check(t, id)
			}()
			waitForReader(t, s, returned)
			release()
			<-returned
		})
	}
}

// TestFlushGivesUpWithItsContext checks that a read waiting for writes the
// writer cannot apply returns when its context ends.
func TestFlushGivesUpWithItsContext(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, tempDB(t), Options{})
	holdWriter(t, s) // released at cleanup
	if err := queueRun(ctx, s, "stuck", StatusSuccess); err != nil {
		t.Fatal(err)
	}
	readCtx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Get(readCtx, "stuck"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with writes pending and a cancelled context = %v, want context.Canceled", err)
	}
}

// TestGroupCommit queues the writes of many runs at once: they are applied
// in far fewer transactions than writes.
func TestGroupCommit(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		release := holdWriter(t, s)
		const runs = 32
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				if err := queueRun(ctx, s, fmt.Sprint("run-", i), StatusSuccess); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		release()
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Runs[StatusSuccess] != runs || st.Writes != 4*runs {
			t.Fatalf("Stats: runs %v, %d writes; want %d successes in %d writes", st.Runs, st.Writes, runs, 4*runs)
		}
		// The writer may have taken the first write before the others were
		// queued: it waits with it for the connection, then takes the rest.
		if st.Transactions > 2 {
			t.Errorf("%d writes took %d transactions, want at most 2", st.Writes, st.Transactions)
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent use, for logs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestFailedWriteLosesNoOther queues, in one batch, writes that fail next
// to writes that do not: the failures are logged with their exec ids or
// returned to the caller that waits, and every other write is applied.
func TestFailedWriteLosesNoOther(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		var logs lockedBuffer
		s := openTest(t, path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := s.StartRun(ctx, Run{ExecID: "dup", Tool: "cli"}); err != nil {
			t.Fatal(err)
		}
		release := holdWriter(t, s)
		queue := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		queue(queueRun(ctx, s, "ok-1", StatusSuccess))
		queue(s.QueueStartRun(ctx, Run{ExecID: "dup", Tool: "cli"}))                                                   // already exists
		queue(s.QueueRecordStep(ctx, StepRecord{ExecID: "ghost", StepID: "a", Status: "success"}))                     // no such run
		queue(s.QueueRecordStep(ctx, StepRecord{ExecID: "ok-1", StepID: "b", Status: "success", Output: []byte("{")})) // not JSON
		queue(s.QueueFinishRun(ctx, "ghost", StatusFailed, nil, time.Time{}, 0))                                       // no such run
		// A caller that waits gets its own error, from the same batch.
		waited := make(chan error, 1)
		go func() { waited <- s.StartRun(ctx, Run{ExecID: "dup", Tool: "cli"}) }()
		for s.q.queuedSoFar() < 9 {
			runtime.Gosched()
		}
		queue(queueRun(ctx, s, "ok-2", StatusSuccess))
		release()

		if err := <-waited; !errors.Is(err, ErrExists) {
			t.Errorf("StartRun(dup) in a batch = %v, want ErrExists", err)
		}
		for _, id := range []string{"ok-1", "ok-2"} {
			run, steps, err := s.Get(ctx, id)
			if err != nil {
				t.Fatalf("%s was lost: %v", id, err)
			}
			if run.Status != StatusSuccess || len(steps) != 1 || steps[0].Status != "success" {
				t.Errorf("%s: %+v with steps %+v, want success with one step", id, run, steps)
			}
		}
		if _, _, err := s.Get(ctx, "ghost"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(ghost) = %v, want ErrNotFound", err)
		}
		got := logs.String()
		for _, want := range []string{
			"exec_id=dup", ErrExists.Error(),
			"exec_id=ghost", ErrNotFound.Error(),
			"exec_id=ok-1", "not valid JSON",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the logs do not say %q:\n%s", want, got)
			}
		}
		if n := strings.Count(got, "writing an execution record"); n != 4 {
			t.Errorf("%d failed writes logged, want 4:\n%s", n, got)
		}
	})
}

// TestCloseAppliesQueuedWrites closes a store with writes queued: Close
// commits them before it closes the database, and refuses later ones.
func TestCloseAppliesQueuedWrites(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	const runs = 50
	for i := range runs {
		if err := queueRun(ctx, s, fmt.Sprint("run-", i), StatusSuccess); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for {
		s.q.mu.Lock()
		done := s.q.closed
		s.q.mu.Unlock()
		if done {
			break
		}
		runtime.Gosched()
	}
	if err := s.QueueStartRun(ctx, Run{ExecID: "late", Tool: "cli"}); !errors.Is(err, ErrClosed) {
		t.Errorf("QueueStartRun after Close = %v, want ErrClosed", err)
	}
	if err := s.StartRun(ctx, Run{ExecID: "late", Tool: "cli"}); !errors.Is(err, ErrClosed) {
		t.Errorf("StartRun after Close = %v, want ErrClosed", err)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	s = openTest(t, path, Options{})
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs[StatusSuccess] != runs || len(st.Runs) != 1 || st.Recovered != 0 {
		t.Fatalf("after Close and Open: runs %v, recovered %d; want %d successes only", st.Runs, st.Recovered, runs)
	}
}

// TestFullQueueWaits fills the queue while the writer cannot write: a
// write then waits for room and gives up with its context; every write
// the queue took is applied.
func TestFullQueueWaits(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Memory, Options{})
	release := holdWriter(t, s)
	for i := range queueSize {
		if err := s.QueueStartRun(ctx, Run{ExecID: fmt.Sprint("run-", i), Tool: "cli"}); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.QueueStartRun(cancelled, Run{ExecID: "one-too-many", Tool: "cli"}); !errors.Is(err, context.Canceled) {
		t.Errorf("QueueStartRun on a full queue = %v, want context.Canceled", err)
	}
	if err := s.StartRun(cancelled, Run{ExecID: "one-too-many", Tool: "cli"}); !errors.Is(err, context.Canceled) {
		t.Errorf("StartRun on a full queue = %v, want context.Canceled", err)
	}
	release()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs[StatusRunning] != queueSize || st.Writes != queueSize {
		t.Fatalf("Stats: runs %v after %d writes, want %d running", st.Runs, st.Writes, queueSize)
	}
}

// TestQueuedRunsFinish records runs that succeed, fail and are cancelled
// with the queued writes only, the way the server's recorder does, and reads
// each back as soon as its last write is queued.
func TestQueuedRunsFinish(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		for _, status := range []Status{StatusSuccess, StatusFailed, StatusPartial} {
			id := "run-" + string(status)
			if err := queueRun(ctx, s, id, status); err != nil {
				t.Fatal(err)
			}
			run, steps, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != status || run.FinishedAt.IsZero() || len(steps) != 1 || steps[0].Status != string(status) {
				t.Errorf("%s: %+v with steps %+v", id, run, steps)
			}
			if want := `{"artifact":{"status":"` + string(status); !strings.HasPrefix(string(run.Envelope), want) {
				t.Errorf("%s: envelope %s, want the one queued", id, run.Envelope)
			}
		}
	})
}

// TestCoalescedBatchMatchesWriteByWrite applies the same writes in one
// batch, where the writer folds a run's finish into its start and a step's
// two writes into one, and one commit at a time: the records are the same.
func TestCoalescedBatchMatchesWriteByWrite(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	// between separates the batches: the first folds, the second fails and
	// is applied write by write.
	writes := func(s *Store, queued bool, between func()) {
		startRun, recordStep, finishRun := s.StartRun, s.RecordStep, s.FinishRun
		if queued {
			startRun, recordStep, finishRun = s.QueueStartRun, s.QueueRecordStep, s.QueueFinishRun
		}
		for i, status := range []Status{StatusSuccess, StatusFailed, StatusPartial} {
			id := fmt.Sprint("run-", i)
			at := start.Add(time.Duration(i) * time.Second)
			startRun(ctx, Run{ExecID: id, RequestID: "req", Tool: "agent_orchestrate", StartedAt: at, StepCount: 2, Plan: json.RawMessage(`{"steps":[]}`)})
			for j, step := range []string{"a", "b"} {
				st := StepRecord{ExecID: id, StepID: step, Index: j, Tool: "echo", Status: "running", StartedAt: at}
				recordStep(ctx, st)
				st.Status, st.Attempts, st.DurationMS, st.Output = string(status), 2, 7, json.RawMessage(`{"n":1}`)
				recordStep(ctx, st)
			}
			env := json.RawMessage(`{"artifact":{"errors":[{"code":"tool_error","message":"boom"}]}}`)
			finishRun(ctx, id, status, env, at.Add(1234567*time.Microsecond), 0)
		}
		// Two finishes: the second one wins.
		startRun(ctx, Run{ExecID: "twice", Tool: "cli", StartedAt: start})
		finishRun(ctx, "twice", StatusFailed, json.RawMessage(`{}`), start.Add(time.Second), 0)
		finishRun(ctx, "twice", StatusSuccess, json.RawMessage(`{"second":true}`), start.Add(2*time.Second), 5)
		between()
		// A step before its run's start fails on its own, wherever it is.
		recordStep(ctx, StepRecord{ExecID: "late", StepID: "a", Status: "running"})
		startRun(ctx, Run{ExecID: "late", Tool: "cli", StartedAt: start})
		recordStep(ctx, StepRecord{ExecID: "late", StepID: "b", Status: "success"})
		finishRun(ctx, "late", StatusSuccess, json.RawMessage(`{}`), start.Add(time.Second), 0)
	}
	read := func(s *Store) map[string]any {
		got := map[string]any{}
		runs, _, err := s.List(ctx, ListOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			run, steps, err := s.Get(ctx, r.ExecID)
			if err != nil {
				t.Fatal(err)
			}
			got[r.ExecID] = []any{run, steps}
		}
		return got
	}

	oneByOne := openTest(t, Memory, Options{})
	writes(oneByOne, false, func() {})
	want := read(oneByOne)

	batched := openTest(t, Memory, Options{})
	release := holdWriter(t, batched)
	writes(batched, true, func() {
		release()
		if err := batched.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		release = holdWriter(t, batched)
	})
	release()
	got := read(batched)
	for name, recs := range map[string]map[string]any{"one by one": want, "batched": got} {
		if run := recs["twice"].([]any)[0].(*Run); run.StepCount != 5 {
			t.Errorf("%s: the step count of a finish that gives one is %d, want 5", name, run.StepCount)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records written in one batch differ from those written one by one (-want +got):\n%s", diff)
	}
	if len(got) != 5 {
		t.Errorf("%d runs recorded, want 5", len(got))
	}
}
