package store

import (
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// TestMigrationsMatch holds every SQLite migration to a PostgreSQL twin of
// the same number and name, and the other way round.
func TestMigrationsMatch(t *testing.T) {
	names := func(ms []migration) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	if diff := cmp.Diff(names(migrations), names(pgMigrations)); diff != "" {
		t.Errorf("migrations/ and migrations/postgres/ differ (-sqlite +postgres):\n%s", diff)
	}
	for _, m := range pgMigrations {
		if !strings.Contains(m.sql, "PostgreSQL twin of migrations/"+m.name+".sql") {
			t.Errorf("%s does not say which SQLite migration it mirrors", path.Join("migrations/postgres", m.name))
		}
	}
}

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT 1`: `SELECT 1`,
		`UPDATE runs SET a = ?, b = ? WHERE c = ?`: `UPDATE runs SET a = $1, b = $2 WHERE c = $3`,
		`SELECT '?' , "x?" FROM t WHERE a = ?`:     `SELECT '?' , "x?" FROM t WHERE a = $1`,
		`SELECT 'it''s?' FROM t WHERE a = ? AND ?`: `SELECT 'it''s?' FROM t WHERE a = $1 AND $2`,
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIdentityRoundTrip keeps a run's user and tenant, and scopes reads by
// tenant, on every database.
func TestIdentityRoundTrip(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		for _, r := range []Run{
			{ExecID: "a1", Tool: "cli", Owner: "alice", UserID: "alice", Tenant: "a"},
			{ExecID: "a2", Tool: "cli", Owner: "carol", UserID: "carol", Tenant: "a"},
			{ExecID: "b1", Tool: "cli", Owner: "bob", UserID: "bob", Tenant: "b"},
		} {
			if err := s.StartRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		r, _, err := s.Get(ctx, "a1")
		if err != nil || r.UserID != "alice" || r.Tenant != "a" {
			t.Fatalf("Get(a1) = %+v, %v; want user alice, tenant a", r, err)
		}
		if got := listIDs(t, s, ListOptions{Scope: TenantScope("a")}); !cmp.Equal(got, []string{"a2", "a1"}) {
			t.Errorf("tenant a lists %v, want [a2 a1]", got)
		}
		if got := listIDs(t, s, ListOptions{Scope: OwnerScope("alice").InTenant("a")}); !cmp.Equal(got, []string{"a1"}) {
			t.Errorf("alice in a lists %v, want [a1]", got)
		}
		if _, _, err := s.GetIn(ctx, TenantScope("a"), "b1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("tenant a reads b1: %v, want ErrNotFound", err)
		}
		if _, _, err := s.GetIn(ctx, OwnerScope("bob").InTenant("a"), "b1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob within tenant a reads b1: %v, want ErrNotFound", err)
		}
		if _, _, err := s.GetIn(ctx, TenantScope("b"), "b1"); err != nil {
			t.Errorf("tenant b reads b1: %v", err)
		}
	})
}

// TestLeaseLapse: on a shared PostgreSQL database a replica's runs are
// interrupted by another only after their lease lapses, never while the
// replica renews it.
func TestLeaseLapse(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	clk := newClock()
	const lease = time.Minute
	a := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	b := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	if err := a.StartRun(ctx, Run{ExecID: "r1", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStep(ctx, StepRecord{ExecID: "r1", StepID: "s1", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	status := func() Status {
		t.Helper()
		r, steps, err := b.Get(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == StatusInterrupted && steps[0].Status != "interrupted" {
			t.Errorf("run interrupted but its running step is %s", steps[0].Status)
		}
		return r.Status
	}
	sweep := func() int {
		t.Helper()
		n, err := b.interruptLapsed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	clk.Advance(lease / 2)
	if n := sweep(); n != 0 || status() != StatusRunning {
		t.Fatalf("within the lease: %d interrupted, status %s", n, status())
	}
	// a lives: it renews, so a sweep past the first lease spares the run.
	if err := a.renewLeases(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(lease * 3 / 4)
	if n := sweep(); n != 0 || status() != StatusRunning {
		t.Fatalf("renewed lease: %d interrupted, status %s", n, status())
	}
	// a stops renewing (killed): once its lease lapses, b interrupts the run.
	clk.Advance(lease / 4)
	if n := sweep(); n != 0 {
		t.Fatalf("at the lease's end: %d interrupted, want 0", n)
	}
	clk.Advance(time.Nanosecond)
	if n := sweep(); n != 1 || status() != StatusInterrupted {
		t.Fatalf("after the lease: %d interrupted, status %s; want 1, interrupted", n, status())
	}
	// A store never interrupts its own runs by lease: only Close does.
	if err := b.StartRun(ctx, Run{ExecID: "r2", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * lease)
	if n := sweep(); n != 0 {
		t.Errorf("b interrupted %d of its own runs", n)
	}
	// A replica opening later recovers lapsed runs as it opens.
	if err := a.StartRun(ctx, Run{ExecID: "r3", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * lease)
	c := openTest(t, url, Options{Now: clk.Now, Lease: lease})
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recovered != 2 { // r2 of b and r3 of a: neither renewed
		t.Errorf("Recovered = %d, want 2", st.Recovered)
	}
	if strings.Contains(st.Path, "password") {
		t.Errorf("Stats.Path %q", st.Path)
	}
}
