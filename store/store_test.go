package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// clock is a settable time source for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openTest(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func tempDB(t testing.TB) string {
	return filepath.Join(t.TempDir(), "state", "orchestra", "orchestra.db")
}

// both runs a test against an in-memory and an on-disk SQLite store, and a
// PostgreSQL one (see testutil/pgtest).
func both(t *testing.T, f func(t *testing.T, path string)) {
	t.Run("memory", func(t *testing.T) { f(t, Memory) })
	t.Run("file", func(t *testing.T) { f(t, tempDB(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, pgtest.URL(t)) })
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func TestRoundTrip(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		clk := newClock()
		s := openTest(t, path, Options{Now: clk.Now})

		start := clk.Now().Add(123456789 * time.Nanosecond)
		run := Run{
			ExecID: "exec-1", RequestID: "req-1", Tool: "agent_orchestrate",
			StartedAt: start, StepCount: 2,
			Plan: json.RawMessage(`{"steps":[{"id":"a","tool":"echo"},{"id":"b","tool":"echo"}]}`),
		}
		if err := s.StartRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		got, steps, err := s.Get(ctx, "exec-1")
		if err != nil {
			t.Fatal(err)
		}
		want := run
		want.Status = StatusRunning
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("running run (-want +got):\n%s", diff)
		}
		if len(steps) != 0 {
			t.Errorf("steps = %v, want none", steps)
		}

		a := StepRecord{ExecID: "exec-1", StepID: "a", StepExecID: "step-exec-a", Index: 0, Tool: "echo", Status: "running", StartedAt: start}
		if err := s.RecordStep(ctx, a); err != nil {
			t.Fatal(err)
		}
		// The second record of a step replaces the first.
		a.Status, a.DurationMS, a.Attempts, a.Output = "success", 12, 1, json.RawMessage(`{"text":"hi"}`)
		b := StepRecord{ExecID: "exec-1", StepID: "b", Index: 1, Path: "1", Tool: "echo", Status: "failed",
			StartedAt: start.Add(time.Millisecond), DurationMS: 3, Attempts: 3,
			Error: json.RawMessage(`{"code":"tool_error","message":"boom"}`)}
		for _, st := range []StepRecord{b, a} {
			if err := s.RecordStep(ctx, st); err != nil {
				t.Fatal(err)
			}
		}

		envelope := json.RawMessage(`{"artifact_id":"x","artifact":{"status":"failed","errors":[{"step":1,"code":"tool_error","message":"boom"}]}}`)
		finished := start.Add(1500 * time.Millisecond)
		if err := s.FinishRun(ctx, "exec-1", StatusFailed, envelope, finished, 0); err != nil {
			t.Fatal(err)
		}
		got, steps, err = s.Get(ctx, "exec-1")
		if err != nil {
			t.Fatal(err)
		}
		want.Status, want.FinishedAt, want.DurationMS, want.Envelope = StatusFailed, finished, 1500, envelope
		want.Error = "tool_error: boom"
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("finished run (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]StepRecord{a, b}, steps); diff != "" {
			t.Errorf("steps (-want +got):\n%s", diff)
		}
	})
}

func TestErrors(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Memory, Options{})
	if err := s.StartRun(ctx, Run{ExecID: "e", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error // nil: any error
	}{
		{"duplicate run", s.StartRun(ctx, Run{ExecID: "e", Tool: "cli"}), ErrExists},
		{"run without tool", s.StartRun(ctx, Run{ExecID: "f"}), nil},
		{"bad plan JSON", s.StartRun(ctx, Run{ExecID: "g", Tool: "cli", Plan: json.RawMessage(`{`)}), nil},
		{"bad status", s.StartRun(ctx, Run{ExecID: "h", Tool: "cli", Status: "done"}), nil},
		{"step of unknown run", s.RecordStep(ctx, StepRecord{ExecID: "nope", StepID: "a", Status: "success"}), ErrNotFound},
		{"step without status", s.RecordStep(ctx, StepRecord{ExecID: "e", StepID: "a"}), nil},
		{"bad output JSON", s.RecordStep(ctx, StepRecord{ExecID: "e", StepID: "a", Status: "success", Output: json.RawMessage(`x`)}), nil},
		{"finish unknown run", s.FinishRun(ctx, "nope", StatusSuccess, nil, time.Time{}, 0), ErrNotFound},
		{"finish as running", s.FinishRun(ctx, "e", StatusRunning, nil, time.Time{}, 0), nil},
		{"bad envelope JSON", s.FinishRun(ctx, "e", StatusSuccess, json.RawMessage(`[`), time.Time{}, 0), nil},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: no error", tt.name)
		} else if tt.want != nil && !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: error %v, want %v", tt.name, tt.err, tt.want)
		}
	}

	_, _, err := s.Get(ctx, "missing-id")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	if err == nil || !strings.Contains(err.Error(), "missing-id") {
		t.Errorf("Get(missing) error %q does not name the id", err)
	}
	if _, _, err := s.List(ctx, ListOptions{Cursor: "garbage"}); !errors.Is(err, ErrInvalidCursor) {
		t.Errorf("List(bad cursor) = %v, want ErrInvalidCursor", err)
	}
	if _, err := Open(ctx, "", Options{}); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func TestSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartRun(ctx, Run{ExecID: "e1", Tool: "cli", Plan: json.RawMessage(`{"steps":[]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordStep(ctx, StepRecord{ExecID: "e1", StepID: "0", Status: "success", Output: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, "e1", StatusSuccess, json.RawMessage(`{"ok":true}`), time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("database mode %v, want 0600", perm)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("parent directory: %v, %v; want mode 0700", fi.Mode().Perm(), err)
	}

	s2 := openTest(t, path, Options{})
	run, steps, err := s2.Get(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusSuccess || string(run.Envelope) != `{"ok":true}` || string(run.Plan) != `{"steps":[]}` {
		t.Errorf("after reopen: %+v", run)
	}
	if len(steps) != 1 || string(steps[0].Output) != "1" {
		t.Errorf("steps after reopen: %+v", steps)
	}
	st, err := s2.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recovered != 0 || st.Runs[StatusSuccess] != 1 || st.SchemaVersion != latestVersion() {
		t.Errorf("Stats = %+v", st)
	}
}

func TestPragmas(t *testing.T) {
	s := openTest(t, tempDB(t), Options{})
	ctx := t.Context()
	var mode string
	var fk, timeout int
	if err := s.writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.writer.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := s.reader.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 || timeout != int(busyTimeout.Milliseconds()) {
		t.Errorf("journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, timeout)
	}
}

// TestConcurrentRuns runs many orchestrations at once, each writing its own
// steps while others read, and checks that every run reads back intact.
func TestConcurrentRuns(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		const workers, runsEach, stepsEach = 16, 5, 5

		var wg sync.WaitGroup
		errs := make(chan error, workers*2)
		for w := range workers {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for r := range runsEach {
					if err := writeRun(ctx, s, fmt.Sprintf("w%d-r%d", w, r), stepsEach); err != nil {
						errs <- err
						return
					}
				}
			}()
			go func() { // a reader alongside each writer
				defer wg.Done()
				for range runsEach {
					if _, _, err := s.List(ctx, ListOptions{Limit: 10}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		for w := range workers {
			for r := range runsEach {
				id := fmt.Sprintf("w%d-r%d", w, r)
				run, steps, err := s.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if run.Status != StatusSuccess || string(run.Envelope) != fmt.Sprintf(`{"exec":%q}`, id) {
					t.Errorf("%s: %+v", id, run)
				}
				if len(steps) != stepsEach {
					t.Fatalf("%s: %d steps, want %d", id, len(steps), stepsEach)
				}
				for i, st := range steps {
					if st.Index != i || st.StepID != fmt.Sprint("s", i) || string(st.Output) != fmt.Sprintf(`{"exec":%q,"step":%d}`, id, i) {
						t.Errorf("%s step %d: %+v", id, i, st)
					}
				}
			}
		}
		all := 0
		for page, cur := 0, ""; page == 0 || cur != ""; page++ {
			runs, next, err := s.List(ctx, ListOptions{Limit: 37, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			all += len(runs)
			cur = next
		}
		if all != workers*runsEach {
			t.Errorf("listed %d runs, want %d", all, workers*runsEach)
		}
	})
}

// writeRun records a whole run as the executor would.
func writeRun(ctx context.Context, s *Store, id string, steps int) error {
	if err := s.StartRun(ctx, Run{ExecID: id, Tool: "agent_orchestrate", StepCount: steps,
		Plan: json.RawMessage(`{"steps":[]}`)}); err != nil {
		return err
	}
	for i := range steps {
		st := StepRecord{ExecID: id, StepID: fmt.Sprint("s", i), Index: i, Tool: "echo", Status: "running", StartedAt: time.Now()}
		if err := s.RecordStep(ctx, st); err != nil {
			return err
		}
		st.Status, st.Attempts, st.DurationMS = "success", 1, 1
		st.Output = json.RawMessage(fmt.Sprintf(`{"exec":%q,"step":%d}`, id, i))
		if err := s.RecordStep(ctx, st); err != nil {
			return err
		}
	}
	return s.FinishRun(ctx, id, StatusSuccess, json.RawMessage(fmt.Sprintf(`{"exec":%q}`, id)), time.Time{}, 0)
}

func TestRetentionByAge(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		clk := newClock()
		s := openTest(t, path, Options{Now: clk.Now, Retention: Retention{MaxAge: 24 * time.Hour}})
		s.pruneInterval = 365 * 24 * time.Hour // only the explicit Prune below

		for i := range 5 { // one run a day, the oldest first
			id := fmt.Sprint("day", i)
			if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli"}); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordStep(ctx, StepRecord{ExecID: id, StepID: "a", Status: "success"}); err != nil {
				t.Fatal(err)
			}
			if i != 1 { // day1 is still running
				if err := s.FinishRun(ctx, id, StatusSuccess, nil, time.Time{}, 0); err != nil {
					t.Fatal(err)
				}
			}
			clk.Advance(24*time.Hour - time.Minute)
		}
		// Now is 4d23h55m after day0 started: day4 (23h59m old) is the only
		// finished run young enough; day1 is old but running.
		n, err := s.Prune(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("Prune deleted %d runs, want 3", n)
		}
		if got := listIDs(t, s, ListOptions{}); !cmp.Equal(got, []string{"day4", "day1"}) {
			t.Errorf("kept %v, want [day4 day1]", got)
		}
		var orphans int
		if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM steps WHERE exec_id NOT IN (SELECT exec_id FROM runs)`).Scan(&orphans); err != nil {
			t.Fatal(err)
		}
		if orphans != 0 {
			t.Errorf("%d steps outlived their runs", orphans)
		}
	})
}

func TestRetentionByCount(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		clk := newClock()
		s := openTest(t, path, Options{Now: clk.Now, Retention: Retention{MaxRuns: 3}})
		s.pruneEvery = 4 // FinishRun prunes every 4 runs; the clock never reaches pruneInterval

		for i := range 10 {
			clk.Advance(time.Second)
			id := fmt.Sprint("r", i)
			if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli"}); err != nil {
				t.Fatal(err)
			}
			if err := s.FinishRun(ctx, id, StatusSuccess, nil, time.Time{}, 0); err != nil {
				t.Fatal(err)
			}
			if i == 7 { // 8 finished runs: FinishRun pruned twice, the last time just now
				if got := listIDs(t, s, ListOptions{}); !cmp.Equal(got, []string{"r7", "r6", "r5"}) {
					t.Errorf("after automatic prune: %v", got)
				}
			}
		}
		if n, err := s.Prune(ctx); err != nil || n != 2 {
			t.Errorf("Prune = %d, %v; want 2", n, err)
		}
		if got := listIDs(t, s, ListOptions{}); !cmp.Equal(got, []string{"r9", "r8", "r7"}) {
			t.Errorf("kept %v", got)
		}
	})
}

func TestPruneAfterInterval(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	s := openTest(t, Memory, Options{Now: clk.Now, Retention: Retention{MaxRuns: 1}})
	for i := range 3 {
		id := fmt.Sprint("r", i)
		if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli"}); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			clk.Advance(s.pruneInterval)
		}
		if err := s.FinishRun(ctx, id, StatusSuccess, nil, time.Time{}, 0); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	if got := listIDs(t, s, ListOptions{}); !cmp.Equal(got, []string{"r2"}) {
		t.Errorf("kept %v, want [r2]", got)
	}
}

func listIDs(t *testing.T, s *Store, opts ListOptions) []string {
	t.Helper()
	runs, _, err := s.List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ExecID)
	}
	return ids
}

func TestListPagination(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		clk := newClock()
		s := openTest(t, path, Options{Now: clk.Now})

		start := func(id string, status Status) {
			t.Helper()
			if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli", Plan: json.RawMessage(`{"big":"plan"}`)}); err != nil {
				t.Fatal(err)
			}
			if status != StatusRunning {
				if err := s.FinishRun(ctx, id, status, json.RawMessage(`{"big":"envelope"}`), time.Time{}, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range 7 {
			clk.Advance(time.Second)
			status := StatusSuccess
			if i%3 == 0 {
				status = StatusFailed
			}
			start(fmt.Sprint("r", i), status)
		}
		// Two runs with the same start time: insertion order breaks the tie.
		start("r7", StatusSuccess)

		page, next, err := s.List(ctx, ListOptions{Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(page); !cmp.Equal(got, []string{"r7", "r6", "r5"}) {
			t.Errorf("page 1: %v", got)
		}
		if next == "" {
			t.Fatal("page 1 has no next cursor")
		}
		for _, r := range page {
			if r.Plan != nil || r.Envelope != nil {
				t.Errorf("List returned bodies for %s", r.ExecID)
			}
		}

		// Runs started between pages land before the cursor and shift nothing.
		clk.Advance(time.Second)
		start("new1", StatusRunning)
		start("new2", StatusSuccess)

		page, next, err = s.List(ctx, ListOptions{Limit: 3, Cursor: next})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(page); !cmp.Equal(got, []string{"r4", "r3", "r2"}) {
			t.Errorf("page 2: %v", got)
		}
		page, next, err = s.List(ctx, ListOptions{Limit: 3, Cursor: next})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(page); !cmp.Equal(got, []string{"r1", "r0"}) || next != "" {
			t.Errorf("page 3: %v, next %q; want [r1 r0] and no cursor", got, next)
		}

		// A page that ends exactly at the last run has no next cursor.
		if _, next, err := s.List(ctx, ListOptions{Limit: 10}); err != nil || next != "" {
			t.Errorf("List(10 of 10) next = %q, %v", next, err)
		}

		// Filtering by status pages the same way.
		var failed []string
		for cur := ""; ; {
			page, next, err := s.List(ctx, ListOptions{Limit: 1, Status: StatusFailed, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			failed = append(failed, ids(page)...)
			if next == "" {
				break
			}
			cur = next
		}
		if !cmp.Equal(failed, []string{"r6", "r3", "r0"}) {
			t.Errorf("failed runs: %v", failed)
		}
		if got := listIDs(t, s, ListOptions{Status: StatusRunning}); !cmp.Equal(got, []string{"new1"}) {
			t.Errorf("running runs: %v", got)
		}
	})
}

func ids(runs []Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ExecID)
	}
	return out
}

// TestCloseInterruptsOwnRuns: a store closed with runs unfinished leaves
// them interrupted rather than running forever.
func TestCloseInterruptsOwnRuns(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartRun(ctx, Run{ExecID: "left", Tool: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(instanceDir(path))
	if err != nil || len(entries) != 0 {
		t.Errorf("owner lock files after Close: %v, %v", entries, err)
	}
	s2 := openTest(t, path, Options{})
	run, _, err := s2.Get(ctx, "left")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusInterrupted {
		t.Errorf("status %q, want interrupted", run.Status)
	}
}

// TestOpenSparesLiveOwner: opening a database that another open store is
// writing to leaves that store's running runs alone.
func TestOpenSparesLiveOwner(t *testing.T) {
	ctx := t.Context()
	path := tempDB(t)
	a := openTest(t, path, Options{})
	if err := a.StartRun(ctx, Run{ExecID: "live", Tool: "agent_orchestrate"}); err != nil {
		t.Fatal(err)
	}
	b := openTest(t, path, Options{})
	run, _, err := b.Get(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusRunning {
		t.Errorf("status %q, want running", run.Status)
	}
	if st, _ := b.Stats(ctx); st.Recovered != 0 {
		t.Errorf("Recovered = %d, want 0", st.Recovered)
	}
	// The owner carries on, and the second store sees its writes.
	if err := a.FinishRun(ctx, "live", StatusSuccess, nil, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if run, _, err := b.Get(ctx, "live"); err != nil || run.Status != StatusSuccess {
		t.Errorf("after finish: %+v, %v", run, err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if p, err := DefaultPath(); err != nil || p != filepath.FromSlash("/x/state/orchestra/orchestra.db") {
		t.Errorf("DefaultPath() = %q, %v", p, err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"", "relative/state"} {
		t.Setenv("XDG_STATE_HOME", v)
		want := filepath.Join(home, ".local", "state", "orchestra", "orchestra.db")
		if p, err := DefaultPath(); err != nil || p != want {
			t.Errorf("XDG_STATE_HOME=%q: DefaultPath() = %q, %v; want %q", v, p, err, want)
		}
	}
}

func TestEnvelopeError(t *testing.T) {
	tests := map[string]string{
		``:                "",
		`not json`:        "",
		`{"artifact":{}}`: "",
		`{"artifact":{"errors":[{"code":"timeout","message":"step a timed out"}]}}`:             "timeout: step a timed out",
		`{"artifact":{"errors":[],"validation_errors":[{"code":"unknown_ref","message":"m"}]}}`: "unknown_ref: m",
		`{"artifact":{"errors":[{"code":"cancelled"}]}}`:                                        "cancelled",
	}
	for in, want := range tests {
		if got := readEnvelope(json.RawMessage(in), true).err; got != want {
			t.Errorf("readEnvelope(%s).err = %q, want %q", in, got, want)
		}
	}
}

// TestSweepsStaleLocks: lock files of ended stores that left no runs
// running are removed once they are old enough to be sure of.
func TestSweepsStaleLocks(t *testing.T) {
	path := tempDB(t)
	dir := instanceDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(dir, "old.lock"), filepath.Join(dir, "fresh.lock")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleLockAge)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	openTest(t, path, Options{})
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("stale lock file kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh lock file removed: %v", err)
	}
}

// TestRetentionByCountOrder checks which runs Prune keeps by count when
// start times tie and old runs still run: the newest MaxRuns in List's
// order, and every running run.
func TestRetentionByCountOrder(t *testing.T) {
	ctx := t.Context()
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, keep := range []int{1, 3, 5, 12, 20} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			s := openTest(t, Memory, Options{Retention: Retention{MaxRuns: keep}})
			// 16 runs over 5 distinct start times, out of order; every
			// fifth one still running.
			for i := range 16 {
				id := fmt.Sprint("r", i)
				if err := s.StartRun(ctx, Run{ExecID: id, Tool: "cli", StartedAt: base.Add(time.Duration((i*7)%5) * time.Second)}); err != nil {
					t.Fatal(err)
				}
				if i%5 != 0 {
					if err := s.FinishRun(ctx, id, StatusSuccess, nil, time.Time{}, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			all := listIDs(t, s, ListOptions{Limit: 100})
			var want []string
			for i, id := range all {
				var n int
				fmt.Sscanf(id, "r%d", &n)
				if i < keep || n%5 == 0 {
					want = append(want, id)
				}
			}
			if _, err := s.Prune(ctx); err != nil {
				t.Fatal(err)
			}
			if got := listIDs(t, s, ListOptions{Limit: 100}); !cmp.Equal(got, want) {
				t.Errorf("kept %v, want %v (of %v)", got, want, all)
			}
		})
	}
}
