package termview

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/termtest"
)

// testPlan has a tool step, a parallel group of two, a loop, an agent's
// step and a step that never runs.
const testPlan = `{"steps": [
	{"id": "a", "tool": "fx__echo", "arguments": {}},
	{"id": "g", "parallel": [
		{"id": "left", "tool": "fx__sleep", "arguments": {}},
		{"id": "right", "tool": "fx__progress", "arguments": {}}]},
	{"id": "l", "for_each": [1, 2], "do": {"tool": "fx__echo", "arguments": {}}},
	{"id": "w", "agent": "writer", "prompt": "write"},
	{"id": "never", "tool": "fx__echo", "arguments": {}}
]}`

// feed calls a view's hooks as an engine would, at times it is told.
type feed struct {
	t    *testing.T
	h    *orchestrate.Hooks
	t0   time.Time
	run  *orchestrate.RunInfo
	plan *orchestrate.Plan
	recs map[string]*orchestrate.StepRecord
}

func newFeed(t *testing.T, h *orchestrate.Hooks, t0 time.Time) *feed {
	t.Helper()
	plan, issues := orchestrate.DecodePlan([]byte(testPlan))
	if len(issues) > 0 {
		t.Fatalf("the test plan: %v", issues)
	}
	f := &feed{t: t, h: h, t0: t0, plan: plan, recs: map[string]*orchestrate.StepRecord{},
		run: &orchestrate.RunInfo{ExecID: "root", Plan: plan, Leaves: len(plan.Leaves()), StartedAt: t0, Source: "cli"}}
	for _, s := range plan.All() {
		typ := "tool"
		switch {
		case s.IsGroup():
			typ = "parallel"
		case s.IsLoop():
			typ = orchestrate.TypeForEach
		case s.Agent != "":
			typ = "agent"
		}
		f.recs[s.ID] = &orchestrate.StepRecord{ID: s.ID, Index: s.Index(), Path: s.Path(), Type: typ, Tool: s.Tool}
	}
	return f
}

func (f *feed) at(ms int) time.Time { return f.t0.Add(time.Duration(ms) * time.Millisecond) }

// iteration adds the record of the loop's iteration n.
func (f *feed) iteration(n int) *orchestrate.StepRecord {
	id := fmt.Sprintf("l[%d]", n)
	rec := &orchestrate.StepRecord{ID: id, Index: 2, Path: fmt.Sprintf("%s.do[%d]", f.recs["l"].Path, n), Type: "tool", Tool: "fx__echo", Iteration: &n}
	f.recs[id] = rec
	if n > 0 {
		f.run.Leaves++ // as the engine counts a loop's iterations once its array resolved
	}
	return rec
}

func (f *feed) started(ms int, id string) {
	rec := f.recs[id]
	at := f.at(ms)
	rec.Status, rec.StartedAt = orchestrate.StatusRunning, &at
	cp := *rec
	f.h.StepStarted(orchestrate.StepStartedInfo{Run: f.run, At: at, Step: &cp})
}

func (f *feed) ended(ms int, id, status string, fail *orchestrate.Error) {
	rec := f.recs[id]
	rec.Status, rec.Error = status, fail
	if rec.StartedAt != nil {
		rec.DurationMS = f.at(ms).Sub(*rec.StartedAt).Milliseconds()
	}
	cp := *rec
	f.h.StepEnded(orchestrate.StepEndedInfo{Run: f.run, At: f.at(ms), Step: &cp})
}

func (f *feed) progress(ms int, id string, p registry.Progress) {
	cp := *f.recs[id]
	f.h.StepProgress(orchestrate.StepProgressInfo{Run: f.run, At: f.at(ms), Step: &cp, Progress: p})
}

// agent runs the agent's child run: a model turn, a tool call, another
// model turn.
func (f *feed) agent(ms int) {
	child := &orchestrate.RunInfo{ExecID: "child", ParentExecID: "root", Source: "agent__writer", StartedAt: f.at(ms)}
	f.h.RunStarted(orchestrate.RunStartedInfo{Run: child, At: f.at(ms)})
	step := func(ms int, rec orchestrate.StepRecord, start bool) {
		at := f.at(ms)
		rec.StartedAt = &at
		if start {
			f.h.StepStarted(orchestrate.StepStartedInfo{Run: child, At: at, Step: &rec})
		} else {
			f.h.StepEnded(orchestrate.StepEndedInfo{Run: child, At: at, Step: &rec})
		}
	}
	step(ms+1, orchestrate.StepRecord{ID: "model_0", Type: "model", Tool: "gpt-test", Status: "success"}, false)
	step(ms+2, orchestrate.StepRecord{ID: "call_0", Type: "tool", Tool: "fx__echo", Status: "running"}, true)
	step(ms+12, orchestrate.StepRecord{ID: "call_0", Type: "tool", Tool: "fx__echo", Status: "success", DurationMS: 10}, false)
	step(ms+20, orchestrate.StepRecord{ID: "model_2", Type: "model", Tool: "gpt-test", Status: "success"}, false)
	f.h.RunFinished(orchestrate.RunFinishedInfo{Run: child, At: f.at(ms + 21), Envelope: &orchestrate.Envelope{Artifact: &orchestrate.Artifact{Status: "success"}}})
}

func (f *feed) runStarted() {
	f.h.RunStarted(orchestrate.RunStartedInfo{Run: f.run, At: f.t0})
	f.h.PlanReady(orchestrate.PlanReadyInfo{Run: f.run, At: f.t0, Plan: f.plan})
}

func (f *feed) runFinished(ms int, status string) {
	f.h.RunFinished(orchestrate.RunFinishedInfo{Run: f.run, At: f.at(ms), Envelope: &orchestrate.Envelope{
		Artifact: &orchestrate.Artifact{Status: status}, Metadata: orchestrate.Metadata{DurationMS: int64(ms)}}})
}

// whole feeds a whole run.
func (f *feed) whole() {
	f.runStarted()
	f.started(0, "a")
	f.ended(120, "a", "success", nil)
	f.started(120, "g")
	f.started(120, "left")
	f.started(125, "right")
	f.progress(500, "right", registry.Progress{Progress: 1, Total: 4, Message: "fetching"})
	f.progress(510, "right", registry.Progress{Progress: 1.1, Total: 4, Message: "fetching"}) // not a tenth further: no line
	f.ended(1120, "left", "success", nil)
	f.ended(1625, "right", "failed", &orchestrate.Error{Code: "tool_error", Message: "it\nfailed"})
	f.ended(1625, "g", "partial", nil)
	f.started(1625, "l")
	f.iteration(0)
	f.iteration(1)
	f.started(1625, "l[0]")
	f.ended(1700, "l[0]", "success", nil)
	f.started(1700, "l[1]")
	f.ended(1800, "l[1]", "success", nil)
	f.ended(1800, "l", "success", nil)
	f.started(2000, "w")
	f.agent(2000)
	f.ended(2030, "w", "success", nil)
	f.ended(2030, "never", "skipped", nil)
	f.runFinished(2030, "partial")
}

// TestLines writes a line per event, indented under groups and loops,
// with the time since the run started: progress only when its message
// changes or it gets a tenth further, an agent's model turns and tool
// calls under its step, and never a control sequence.
func TestLines(t *testing.T) {
	var out bytes.Buffer
	v := New(&out, Options{Mode: Lines})
	newFeed(t, v.Hooks(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)).whole()
	fmt.Fprintln(v.Writer(), "a log line")
	v.Close()
	want := `[   0ms] plan started: 6 tool steps
[   0ms] a (fx__echo) started
[ 120ms] a (fx__echo) success in 120ms
[ 120ms] g (parallel group) started
[ 120ms]   left (fx__sleep) started
[ 125ms]   right (fx__progress) started
[ 500ms]   right (fx__progress): 1/4 fetching
[  1.1s]   left (fx__sleep) success in 1.0s
[  1.6s]   right (fx__progress) failed in 1.5s: tool_error: it failed
[  1.6s] g (parallel group) partial in 1.5s
[  1.6s] l (loop) started
[  1.6s]   l[0] (fx__echo) started
[  1.7s]   l[0] (fx__echo) success in 75ms
[  1.7s]   l[1] (fx__echo) started
[  1.8s]   l[1] (fx__echo) success in 100ms
[  1.8s] l (loop) success in 175ms
[  2.0s] w (agent__writer) started
[  2.0s]   w: model turn 1 (gpt-test)
[  2.0s]   w: called fx__echo: success in 10ms
[  2.0s]   w: model turn 2 (gpt-test)
[  2.0s] w (agent__writer) success in 30ms
[  2.0s] never (fx__echo) skipped
[  2.0s] plan partial in 2.0s
a log line
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if strings.ContainsRune(out.String(), 0x1b) {
		t.Error("a Lines view wrote a control sequence")
	}
}

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// openTerminal returns a pseudo-terminal of 40 rows of 120 columns, and a
// screen that shows what is drawn on it.
func openTerminal(t *testing.T) (*os.File, *termtest.Screen) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	screen := &termtest.Screen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(screen, ptmx)
	}()
	t.Cleanup(func() {
		tty.Close()
		ptmx.Close()
		<-done
	})
	return tty, screen
}

// waitFor waits until the screen shows what ok wants; the deadline only
// bounds a hang.
func waitFor(t *testing.T, screen *termtest.Screen, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := screen.Wait(ctx, ok); err != nil {
		t.Fatalf("the screen never showed %s:\n%s", what, screen)
	}
}

// shows reports whether the screen has a line with every one of parts.
func shows(screen *termtest.Screen, parts ...string) bool {
	for _, l := range screen.Lines() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestLive draws a row per step on a terminal and redraws it in place:
// running steps side by side with their elapsed time growing as the clock
// moves, a progress bar, an agent's turns, then every step's final status
// and duration; logs appear above the rows, and the last frame stays.
func TestLive(t *testing.T) {
	tty, screen := openTerminal(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &clock{t: t0}
	v := New(tty, Options{Mode: Live, Refresh: 20 * time.Millisecond, Now: c.now})
	f := newFeed(t, v.Hooks(), t0)
	f.runStarted()
	f.started(0, "a")
	f.ended(120, "a", "success", nil)
	f.started(120, "g")
	f.started(120, "left")
	f.started(125, "right")
	c.set(f.at(1500))
	waitFor(t, screen, "both steps running at 1.4s", func() bool {
		return shows(screen, "left", "fx__sleep", "running", "1.4s") && shows(screen, "right", "fx__progress", "running", "1.4s")
	})
	fmt.Fprintln(v.Writer(), "a log line")
	f.progress(2000, "right", registry.Progress{Progress: 2, Total: 4, Message: "fetching"})
	c.set(f.at(3000))
	waitFor(t, screen, "the elapsed times grown to 2.9s, and right's progress", func() bool {
		return shows(screen, "left", "running", "2.9s") && shows(screen, "right", "running", "2.9s", "[", "2/4 fetching")
	})
	f.ended(3120, "left", "success", nil)
	f.ended(3625, "right", "failed", &orchestrate.Error{Code: "tool_error", Message: "it failed"})
	f.ended(3625, "g", "partial", nil)
	f.started(3625, "l")
	f.iteration(0)
	f.iteration(1)
	f.started(3625, "l[0]")
	f.ended(3700, "l[0]", "success", nil)
	f.started(3700, "l[1]")
	c.set(f.at(3750))
	waitFor(t, screen, "the loop's counts", func() bool { return shows(screen, "l", "loop", "running", "1 iteration done · 1 running") })
	f.ended(3800, "l[1]", "success", nil)
	f.ended(3800, "l", "success", nil)
	f.started(4000, "w")
	f.agent(4000)
	f.ended(4030, "w", "success", nil)
	f.ended(4030, "never", "skipped", nil)
	f.runFinished(4030, "partial")
	v.Close()
	fmt.Fprintln(v.Writer(), "after")
	waitFor(t, screen, "what was written after Close", func() bool { return shows(screen, "after") })

	lines := screen.Lines()
	var got []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"a log line",
		"! plan partial 4.0s 7 of 7 tool steps done",
		"✓ a fx__echo success 120ms",
		"! g parallel group partial 3.5s 2 of 2 done",
		"✓ left fx__sleep success 3.0s",
		"✗ right fx__progress failed 3.5s tool_error: it failed",
		"✓ l loop success 175ms 2 iterations done",
		"✓ w agent__writer success 30ms 2 model turns · 1 tool call",
		"- never fx__echo skipped",
		"after",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the last frame (-want +got):\n%s\nscreen:\n%s", diff, screen)
	}
	if screen.Controls() == 0 {
		t.Error("a Live view never moved the cursor")
	}
}

// TestHooksDoNotWaitForTheTerminal feeds a Live view whose terminal
// nobody reads: the hooks return all the same, and the view draws once
// the terminal is read again.
func TestHooksDoNotWaitForTheTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	v := New(tty, Options{Mode: Live, Refresh: time.Millisecond})
	f := newFeed(t, v.Hooks(), time.Now())
	f.runStarted()
	long := strings.Repeat("x", 200)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := range 2000 { // far more than a terminal's buffer holds
			fmt.Fprintf(v.Writer(), "") // a write with nothing to draw never waits either
			f.progress(i, "a", registry.Progress{Progress: float64(i), Message: long})
			f.started(i, "a")
		}
		f.ended(2000, "a", "success", nil)
	}()
	select {
	case <-fed:
	case <-time.After(60 * time.Second):
		t.Fatal("the hooks waited for a terminal nobody reads")
	}
	var screen termtest.Screen
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&screen, ptmx)
	}()
	f.ended(2000, "g", "skipped", nil)
	f.runFinished(2000, "success")
	v.Close()
	tty.Close()
	ptmx.Close()
	<-copied
}

// TestDetect draws live on a terminal, in lines on a dumb one or when
// NO_COLOR is set, and not at all elsewhere.
func TestDetect(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		name string
		w    io.Writer
		env  func(string) string
		want Mode
	}{
		{"terminal", tty, env("TERM", "xterm-256color"), Live},
		{"dumb terminal", tty, env("TERM", "dumb"), Lines},
		{"NO_COLOR", tty, env("TERM", "xterm", "NO_COLOR", "1"), Lines},
		{"empty NO_COLOR", tty, env("TERM", "xterm", "NO_COLOR", ""), Live},
		{"pipe", w, env("TERM", "xterm"), Off},
		{"buffer", &bytes.Buffer{}, env(), Off},
	} {
		if got := Detect(c.w, c.env); got != c.want {
			t.Errorf("%s: Detect = %s, want %s", c.name, got, c.want)
		}
	}
	if New(&bytes.Buffer{}, Options{}).Hooks() != nil {
		t.Error("a view that draws nothing has hooks")
	}
}
