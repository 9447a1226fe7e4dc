package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// A paused run outlives its store: Close does not interrupt it, the next
// store finds it paused, one claim takes it up and the history shows the
// pause and the resume. A run that only kept its request is resumable
// once it was interrupted.
func TestPausedRunOutlivesItsStore(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"paused", "kept"} {
		if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli"}); err != nil {
			t.Fatal(err)
		}
		if err := s.QueueKeepRequest(ctx, id, []byte(`{"plan":{"steps":[]}}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordStep(ctx, StepRecord{ExecID: "paused", StepID: "read", Status: "success", Output: []byte(`{"text":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(time.Hour).Truncate(time.Nanosecond)
	if err := s.Pause(ctx, "paused", []byte(`{"plan":{"steps":[1]}}`), []byte(`[{"call_id":"c1","step":"edit"}]`), []byte(`{"edit":{"state":{"turn":1},"calls":{"c1":"m1"}}}`), expires); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(ctx, "nobody", []byte(`{}`), nil, nil, expires); !errors.Is(err, ErrNotFound) {
		t.Errorf("pausing an unknown run: %v, want ErrNotFound", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openTest(t, path, Options{})
	res, err := s2.ResumableIn(ctx, Scope{}, "paused")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Paused || res.Run.Status != StatusPaused || !res.Run.Resumable || string(res.Request) != `{"plan":{"steps":[1]}}` ||
		string(res.Pending) != `[{"call_id":"c1","step":"edit"}]` || !res.ExpiresAt.Equal(expires) || len(res.Steps) != 1 ||
		string(res.Loops) != `{"edit":{"state":{"turn":1},"calls":{"c1":"m1"}}}` {
		t.Errorf("after reopen: %+v, run %+v", res, res.Run)
	}
	kept, err := s2.ResumableIn(ctx, Scope{}, "kept")
	if err != nil || kept.Paused || kept.Run.Status != StatusInterrupted || !kept.Run.Resumable {
		t.Errorf("an interrupted run that kept its request: %+v, %v", kept, err)
	}
	if _, err := s2.ResumableIn(ctx, OwnerScope("someone"), "paused"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner reads a paused run: %v", err)
	}
	runs, _, err := s2.List(ctx, ListOptions{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("List: %v, %v", runs, err)
	}
	for _, r := range runs {
		if !r.Resumable {
			t.Errorf("List: run %s is not resumable", r.ExecID)
		}
	}

	// Concurrent claims: one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range 6 {
		wg.Go(func() {
			err := s2.Claim(ctx, "paused", res.Claims, "resumed", []byte(`["edit"]`))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, ErrClaimed):
				lost++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != 5 {
		t.Errorf("claims: %d won, %d lost", won, lost)
	}
	run, _, err := s2.Get(ctx, "paused")
	if err != nil || run.Status != StatusRunning || run.Resumable {
		t.Errorf("a claimed run: %+v, %v", run, err)
	}
	if claimed, err := s2.ResumableIn(ctx, Scope{}, "paused"); err != nil || claimed.Loops != nil || claimed.Pending != nil {
		t.Errorf("a claimed run keeps its pause's loops or calls: %+v, %v", claimed, err)
	}
	hist, err := s2.Pauses(ctx, "paused")
	if err != nil || len(hist) != 2 || hist[0].Event != "paused" || hist[1].Event != "resumed" || string(hist[1].Detail) != `["edit"]` || hist[1].Seq != 2 {
		t.Errorf("history %+v, %v", hist, err)
	}
}

// List tells paused runs from running ones.
func TestListPausedRuns(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Memory, Options{})
	for _, id := range []string{"run", "wait"} {
		if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Pause(ctx, "wait", []byte(`{}`), []byte(`[]`), nil, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[Status]string{StatusPaused: "wait", StatusRunning: "run"} {
		runs, _, err := s.List(ctx, ListOptions{Status: status})
		if err != nil || len(runs) != 1 || runs[0].ExecID != want {
			t.Errorf("List(%s) = %+v, %v; want %s", status, runs, err, want)
		}
	}
}

// On a shared PostgreSQL database a paused run outlives its replica: a
// lapsed lease does not interrupt it, another replica claims it once and
// reads it as paused before.
func TestPausedRunOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	clk := newClock()
	a := openTest(t, url, Options{Now: clk.Now, Lease: time.Minute})
	b := openTest(t, url, Options{Now: clk.Now, Lease: time.Minute})
	if err := a.StartRun(ctx, Run{ExecID: "p1", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := a.QueueKeepRequest(ctx, "p1", []byte(`{"plan":{"steps":[]}}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctx, "p1", []byte(`{"plan":{"steps":[]}}`), []byte(`[{"step":"e"}]`), []byte(`{"e":{"state":{"turn":2},"calls":{}}}`), clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour / 2)
	if n, err := b.interruptLapsed(ctx); err != nil || n != 0 {
		t.Fatalf("a sweep interrupted %d paused runs, %v", n, err)
	}
	res, err := b.ResumableIn(ctx, Scope{}, "p1")
	if err != nil || !res.Paused || res.Run.Status != StatusPaused || string(res.Loops) != `{"e":{"state":{"turn":2},"calls":{}}}` {
		t.Fatalf("read from another replica: %+v, %v", res, err)
	}
	if runs, _, err := b.List(ctx, ListOptions{Status: StatusPaused}); err != nil || len(runs) != 1 {
		t.Errorf("List(paused) = %v, %v", runs, err)
	}
	if err := b.Claim(ctx, "p1", res.Claims, "resumed", []byte(`["e"]`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(ctx, "p1", res.Claims, "resumed", nil); !errors.Is(err, ErrClaimed) {
		t.Errorf("a second claim: %v, want ErrClaimed", err)
	}
	if n, err := a.interruptLapsed(ctx); err != nil || n != 0 {
		t.Errorf("the claimed run was taken for lapsed: %d, %v", n, err)
	}
	hist, err := a.Pauses(ctx, "p1")
	if err != nil || len(hist) != 2 {
		t.Errorf("history %+v, %v", hist, err)
	}
}
