package viewer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/store"
)

// TestBuildChart scales bars to real time on an axis from the run's start
// to its end, nests an agent's run under its step (a loop's iterations
// each under theirs), draws unmatched runs after the steps, and pauses as
// bands.
func TestBuildChart(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	root := &store.Run{ExecID: "root", StartedAt: t0, FinishedAt: at(1000), DurationMS: 1000, Status: store.StatusSuccess}
	tree := &runTree{run: root, steps: []store.StepRecord{
		{StepID: "a", Path: "plan.steps[0]", Kind: "tool", Tool: "t", Status: "success", StartedAt: at(0), DurationMS: 250},
		{StepID: "ag[0]", Index: 1, Path: "plan.steps[1].do[0]", Kind: "agent", Tool: "agent__x", Status: "success", StartedAt: at(300), DurationMS: 100},
		{StepID: "ag[1]", Index: 1, Path: "plan.steps[1].do[1]", Kind: "agent", Tool: "agent__x", Status: "failed", StartedAt: at(500), DurationMS: 100, Attempts: 3},
		{StepID: "skipped", Index: 2, Path: "plan.steps[2]", Kind: "tool", Tool: "t", Status: "skipped"},
	}}
	child := func(id string, ms int) *runTree {
		return &runTree{run: &store.Run{ExecID: id, Tool: "agent__x", ParentExecID: "root", StartedAt: at(ms), FinishedAt: at(ms + 90), Status: store.StatusSuccess},
			steps: []store.StepRecord{{StepID: "model_0", Path: "steps[0]", Kind: "model", Tool: "m", Status: "success", StartedAt: at(ms + 1), DurationMS: 80}}}
	}
	// Read newest first, as the store lists them; a stray one started by
	// no step drawn.
	stray := &runTree{run: &store.Run{ExecID: "stray-run", Tool: "other", StartedAt: at(900), FinishedAt: at(950), Status: store.StatusSuccess}}
	tree.children = []*runTree{child("second", 501), child("first", 301), stray}
	pauses := []store.PauseEvent{{Event: "paused", At: at(600)}, {Event: "resumed", At: at(800)}}

	c := buildChart(tree, pauses, at(5000))
	type row struct {
		Run, Step string
		Bar       bool
		X, W      float64
	}
	var got []row
	for _, r := range c.Rows {
		got = append(got, row{r.Run, r.Step, r.Bar, r.X, r.W})
	}
	px := func(ms float64) float64 { return labelWidth + ms*plotWidth/1000 }
	want := []row{
		{"root", "a", true, px(0), 250 * plotWidth / 1000.0},
		{"root", "ag[0]", true, px(300), 100 * plotWidth / 1000.0},
		{"first", "model_0", true, px(302), 80 * plotWidth / 1000.0},
		{"root", "ag[1]", true, px(500), 100 * plotWidth / 1000.0},
		{"second", "model_0", true, px(502), 80 * plotWidth / 1000.0},
		{"root", "skipped", false, 0, 0},
		{"stray-run", "", true, px(900), 50 * plotWidth / 1000.0},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 })); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if c.Span != time.Second {
		t.Errorf("span %s, want the run's 1s", c.Span)
	}
	if len(c.Pauses) != 1 || c.Pauses[0].X != px(600) || c.Pauses[0].W != 200*plotWidth/1000.0 || !strings.Contains(c.Pauses[0].Title, "200 ms") {
		t.Errorf("pauses %+v, want one band from 600 ms to 800 ms", c.Pauses)
	}
	if r := c.Rows[3]; r.Attempts != 3 || !strings.Contains(r.Title, "3 attempts") {
		t.Errorf("the retried step's row %+v does not say its attempts", r)
	}
	if c.Rows[2].LabelX <= c.Rows[1].LabelX {
		t.Errorf("the agent's model turn is not indented under its step")
	}

	// A running run's axis ends now, and its running step's bar with it.
	root.Status, root.FinishedAt = store.StatusRunning, time.Time{}
	tree.steps[0].Status = "running"
	c = buildChart(tree, nil, at(2000))
	if c.Span != 2*time.Second || c.Rows[0].X+c.Rows[0].W != px(1000) {
		t.Errorf("running: span %s, first bar ends at %.1f; want 2s and the plot's end %.1f", c.Span, c.Rows[0].X+c.Rows[0].W, px(1000))
	}
}

// TestJSONBody indents JSON, shows a text output as its text, and cuts a
// large body at a character boundary with the whole's size.
func TestJSONBody(t *testing.T) {
	if b := jsonBody(nil, 10, ""); b != nil {
		t.Errorf("no body: %+v", b)
	}
	if b := jsonBody(json.RawMessage(`{"a":[1]}`), 100, "/whole"); b.Text != "{\n  \"a\": [\n    1\n  ]\n}" || b.Cut || b.Whole != "/whole" {
		t.Errorf("indented: %+v", b)
	}
	if b := jsonBody(json.RawMessage(`{"text":"<b>line\nnext</b>"}`), 100, ""); !b.IsText || b.Text != "<b>line\nnext</b>" {
		t.Errorf("a text output: %+v", b)
	}
	if b := jsonBody(json.RawMessage(`{"text":"x","more":1}`), 100, ""); b.IsText {
		t.Errorf("an object with more than text shown as text: %+v", b)
	}
	long := json.RawMessage(`"` + strings.Repeat("é", 100) + `"`)
	b := jsonBody(long, 51, "")
	if !b.Cut || b.Size != len(long) || len(b.Text) > 51 || !strings.HasPrefix(string(long), b.Text) || strings.ContainsRune(b.Text, '\uFFFD') {
		t.Errorf("cut: %+v", b)
	}
}

// TestSessionsCap ends the session closest to its end when the cap is
// reached, and expired ones first.
func TestSessionsCap(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSessions(2, time.Hour, func() time.Time { return now })
	a, _ := s.start(Identity{Name: "a", Expires: now.Add(time.Minute)})
	b, _ := s.start(Identity{Name: "b"})
	c, _ := s.start(Identity{Name: "c"})
	if len(s.m) != 2 {
		t.Fatalf("%d sessions kept, want the cap of 2", len(s.m))
	}
	for v, want := range map[string]bool{a: false, b: true, c: true} {
		if _, ok := s.m[hashKey(v)]; ok != want {
			t.Errorf("session %s kept: %v, want %v", v[:6], ok, want)
		}
	}
	now = now.Add(2 * time.Hour)
	d, _ := s.start(Identity{Name: "d"})
	if len(s.m) != 1 {
		t.Errorf("%d sessions after the others expired, want only d's", len(s.m))
	}
	if _, ok := s.m[hashKey(d)]; !ok {
		t.Error("d's session is not kept")
	}
}
