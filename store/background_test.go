package store

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// TestTakeOrphans: three replicas on one PostgreSQL database. a runs two
// background runs and a foreground one, then dies (its clock moves past
// its lease). b interrupts them; b and c race to take the orphans up: each
// background run goes to exactly one, the foreground run to none, and no
// replica takes one up again within the takeover's lease. Once resumed (a
// claim), interrupted again and past that lease, a run is taken up again,
// MaxTakeovers times at most.
func TestTakeOrphans(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	clk := newClock()
	const lease = time.Minute
	a := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	b := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	c := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	for _, id := range []string{"bg1", "bg2", "fg"} {
		if err := a.StartRun(ctx, Run{ExecID: id, Tool: "agent_orchestrate", Owner: "alice", Tenant: "t1"}); err != nil {
			t.Fatal(err)
		}
		if err := a.QueueKeepRequest(ctx, id, json.RawMessage(`{"plan":{}}`)); err != nil {
			t.Fatal(err)
		}
		if id != "fg" {
			if err := a.MarkBackground(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := b.TakeOrphans(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("while a's lease holds, b took %v (%v)", got, err)
	}

	clk.Advance(lease + time.Second)
	if n, err := b.interruptLapsed(ctx); err != nil || n != 3 {
		t.Fatalf("b interrupted %d runs (%v), want 3", n, err)
	}
	var mu sync.Mutex
	var taken []string
	var wg sync.WaitGroup
	for _, s := range []*Store{b, c} {
		wg.Go(func() {
			for range 3 {
				got, err := s.TakeOrphans(ctx, 1)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, o := range got {
					if o.Owner != "alice" || o.Tenant != "t1" {
						t.Errorf("orphan %+v: want owner alice, tenant t1", o)
					}
					taken = append(taken, o.ExecID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(taken)
	if !slices.Equal(taken, []string{"bg1", "bg2"}) {
		t.Fatalf("taken %v, want bg1 and bg2 once each", taken)
	}

	// b resumes bg1 and dies in turn; past its lease c takes it up.
	if err := b.Claim(ctx, "bg1", 0, "resumed", nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(lease + time.Second)
	if n, err := c.interruptLapsed(ctx); err != nil || n != 1 {
		t.Fatalf("c interrupted %d runs (%v), want b's bg1", n, err)
	}
	got, err := c.TakeOrphans(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	// bg2 was taken and never resumed: its takeover lease lapsed too.
	ids := []string{}
	for _, o := range got {
		ids = append(ids, o.ExecID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"bg1", "bg2"}) {
		t.Fatalf("c took %v, want bg1 and bg2", ids)
	}
	for range MaxTakeovers {
		clk.Advance(lease + time.Second)
		got, _ = c.TakeOrphans(ctx, 10)
	}
	if len(got) != 0 {
		t.Errorf("taken up again after %d takeovers: %v", MaxTakeovers, got)
	}
}

// TestRequestCancel: a cancel asked on replica b of a background run that
// replica a runs is seen by a, within the caller's scope only; a run that
// is not a background run, or has ended, takes no flag.
func TestRequestCancel(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	a := openTest(t, url, Options{})
	b := openTest(t, url, Options{})
	for _, id := range []string{"bg", "fg", "done"} {
		if err := a.StartRun(ctx, Run{ExecID: id, Tool: "agent_orchestrate", Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
		if id != "fg" {
			if err := a.MarkBackground(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.FinishRun(ctx, "done", StatusSuccess, json.RawMessage(`{}`), time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.RequestCancel(ctx, OwnerScope("mallory"), "bg"); err != nil || ok {
		t.Errorf("another owner's cancel: %v, %v; want no flag", ok, err)
	}
	if ids, err := a.Cancels(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("cancels before any was asked: %v, %v", ids, err)
	}
	for id, want := range map[string]bool{"bg": true, "fg": false, "done": false} {
		if ok, err := b.RequestCancel(ctx, OwnerScope("alice"), id); err != nil || ok != want {
			t.Errorf("RequestCancel(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
	if ids, err := a.Cancels(ctx); err != nil || !slices.Equal(ids, []string{"bg"}) {
		t.Errorf("a's cancels: %v, %v; want [bg]", ids, err)
	}
	if ids, err := b.Cancels(ctx); err != nil || len(ids) != 0 {
		t.Errorf("b runs nothing, yet its cancels are %v, %v", ids, err)
	}
}
