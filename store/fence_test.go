package store

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// TestLeaseFencing: two stores, two replicas, on one PostgreSQL database.
// Replica a starts a run and stalls: its renewals stop (the clock is the
// test's, and a renews only when told). Once the lease lapsed, b marks the
// run interrupted; a wakes and writes its steps, its pause and its end:
// each write is refused (ErrFenced), logged and counted, and the record
// stays as b left it. b then resumes the run and finishes it, and a's late
// writes still change nothing. a resumes a run of its own only once its
// stalled execution ended. A replica that renews never loses its run.
func TestLeaseFencing(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	clk := newClock()
	const lease = time.Minute
	var logs lockedBuffer
	a := openTest(t, url, Options{Now: clk.Now, Lease: lease, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	b := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	env := func(status string) json.RawMessage {
		return json.RawMessage(`{"artifact":{"status":"` + status + `","errors":[{"code":"x","message":"` + status + `"}]}}`)
	}
	snapshot := func() (*Run, []StepRecord) {
		t.Helper()
		r, steps, err := b.Get(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return r, steps
	}
	fenced := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrFenced) {
			t.Errorf("%s: %v, want ErrFenced", what, err)
		}
	}

	if err := a.StartRun(ctx, Run{ExecID: "r1", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := a.QueueKeepRequest(ctx, "r1", json.RawMessage(`{"plan":{}}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s1", Tool: "t", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	// a stalls past its lease; b takes the run over.
	clk.Advance(lease + time.Second)
	if n, err := b.interruptLapsed(ctx); err != nil || n != 1 {
		t.Fatalf("b interrupted %d runs (%v), want 1", n, err)
	}
	run, steps := snapshot()
	if run.Status != StatusInterrupted || steps[0].Status != "interrupted" {
		t.Fatalf("after the takeover: run %s, step %s", run.Status, steps[0].Status)
	}

	// a wakes: its writes are refused, synchronous or queued.
	fenced("a's step", a.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s1", Tool: "t", Status: "success", Output: json.RawMessage(`{"late":true}`)}))
	fenced("a's new step", a.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s2", Tool: "t", Status: "success"}))
	fenced("a's pause", a.Pause(ctx, "r1", json.RawMessage(`{"plan":{}}`), json.RawMessage(`[]`), nil, clk.Now().Add(time.Hour)))
	fenced("a's end", a.FinishRun(ctx, "r1", StatusSuccess, env("success"), time.Time{}, 0))
	if err := a.QueueFinishRun(ctx, "r1", StatusFailed, env("failed"), time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	run2, steps2 := snapshot()
	if diff := cmp.Diff(run, run2); diff != "" {
		t.Errorf("a's late writes changed the run (-b's +now):\n%s", diff)
	}
	if diff := cmp.Diff(steps, steps2); diff != "" {
		t.Errorf("a's late writes changed the steps (-b's +now):\n%s", diff)
	}
	if st, _ := a.Stats(ctx); st.Fenced != 5 {
		t.Errorf("Stats.Fenced = %d, want 5", st.Fenced)
	}
	if got := logs.String(); strings.Count(got, "exec_id=r1") < 5 || !strings.Contains(got, "took over") {
		t.Errorf("the refused writes are not logged with the run's id:\n%s", got)
	}
	if err := a.RecordStep(ctx, StepRecord{ExecID: "nope", StepID: "s1", Status: "running"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a step of an unknown run: %v, want ErrNotFound", err)
	}
	if err := a.FinishRun(ctx, "nope", StatusSuccess, nil, time.Time{}, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("the end of an unknown run: %v, want ErrNotFound", err)
	}

	// b resumes the run and finishes it; a's writes still change nothing.
	res, err := b.ResumableIn(ctx, Scope{}, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, "r1", res.Claims, "resumed", nil); err != nil {
		t.Fatal(err)
	}
	fenced("a's step after b resumed", a.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s1", Tool: "t", Status: "failed"}))
	if err := b.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s1", Tool: "t", Status: "success", Output: json.RawMessage(`{"by":"b"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.FinishRun(ctx, "r1", StatusSuccess, env("success"), time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	fenced("a's end after b finished", a.FinishRun(ctx, "r1", StatusFailed, env("failed"), time.Time{}, 0))
	run, steps = snapshot()
	if run.Status != StatusSuccess || len(steps) != 1 || steps[0].Status != "success" || string(steps[0].Output) != `{"by":"b"}` {
		t.Errorf("the run as b finished it: %s, steps %+v", run.Status, steps)
	}

	// A replica may resume a run another interrupted, but not while its
	// own stalled execution of it still runs: both would write as its
	// instance, which the fence cannot tell apart.
	if err := a.StartRun(ctx, Run{ExecID: "r3", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := a.QueueKeepRequest(ctx, "r3", json.RawMessage(`{"plan":{}}`)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(lease + time.Second)
	if n, err := b.interruptLapsed(ctx); err != nil || n != 1 {
		t.Fatalf("b interrupted %d runs (%v), want 1", n, err)
	}
	res, err = a.ResumableIn(ctx, Scope{}, "r3")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(ctx, "r3", res.Claims, "resumed", nil); !errors.Is(err, ErrStillExecuting) {
		t.Errorf("a resumed r3 while still executing it: %v, want ErrStillExecuting", err)
	}
	fenced("the stalled execution's end", a.FinishRun(ctx, "r3", StatusFailed, env("failed"), time.Time{}, 0))
	if err := a.Claim(ctx, "r3", res.Claims, "resumed", nil); err != nil {
		t.Fatalf("a resuming r3 once its stalled execution ended: %v", err)
	}
	if err := a.RecordStep(ctx, StepRecord{ExecID: "r3", StepID: "s1", Tool: "t", Status: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := a.FinishRun(ctx, "r3", StatusSuccess, env("success"), time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if r, _, err := b.Get(ctx, "r3"); err != nil || r.Status != StatusSuccess {
		t.Errorf("r3 resumed on a: %+v, %v; want success", r, err)
	}

	// A live replica, renewing, never loses its run.
	if err := a.StartRun(ctx, Run{ExecID: "r2", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		clk.Advance(lease / 2)
		if err := a.renewLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := b.interruptLapsed(ctx); err != nil || n != 0 {
			t.Fatalf("b interrupted %d runs of a live replica (%v)", n, err)
		}
		if err := a.RecordStep(ctx, StepRecord{ExecID: "r2", StepID: "s1", Tool: "t", Status: "running"}); err != nil {
			t.Fatalf("a's step of its live run: %v", err)
		}
	}
	if err := a.Pause(ctx, "r2", json.RawMessage(`{"plan":{}}`), json.RawMessage(`[]`), nil, clk.Now().Add(time.Hour)); err != nil {
		t.Fatalf("a's pause of its live run: %v", err)
	}
	if err := a.FinishRun(ctx, "r2", StatusSuccess, env("success"), time.Time{}, 0); err != nil {
		t.Fatalf("a's end of its live run: %v", err)
	}
	if r, _, err := b.Get(ctx, "r2"); err != nil || r.Status != StatusSuccess {
		t.Errorf("a's live run: %+v, %v; want success", r, err)
	}
	if st, _ := a.Stats(ctx); st.Fenced != 8 {
		t.Errorf("Stats.Fenced = %d, want 8", st.Fenced)
	}
}

// TestSQLiteNotFenced: SQLite keeps its behaviour: another store on the
// same file may write a run's steps and end (processes of one machine see
// a dead instance by its lock file, never a live one as dead).
func TestSQLiteNotFenced(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	a := openTest(t, path, Options{})
	b := openTest(t, path, Options{})
	if err := a.StartRun(ctx, Run{ExecID: "r1", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s1", Status: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := b.FinishRun(ctx, "r1", StatusSuccess, nil, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Stats(ctx); st.Fenced != 0 {
		t.Errorf("Stats.Fenced = %d on SQLite", st.Fenced)
	}
}
