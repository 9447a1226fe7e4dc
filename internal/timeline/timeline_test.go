package timeline

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOrder puts steps in plan order: groups' children and loops'
// iterations after them, numerically (do[10] after do[9]), whatever order
// they come in, with their nesting depth.
func TestOrder(t *testing.T) {
	var steps []Step
	var ids []string
	add := func(id string, idx int, path string) {
		steps = append(steps, Step{Index: idx, Path: path})
		ids = append(ids, id)
	}
	add("last", 10, "plan.steps[10]")
	add("it10", 1, "plan.steps[1].do[10]")
	add("it2", 1, "plan.steps[1].do[2]")
	add("loop", 1, "plan.steps[1]")
	add("first", 0, "plan.steps[0]")
	add("g-b", 2, "plan.steps[2].parallel[1]")
	add("g", 2, "plan.steps[2]")
	add("g-a-x", 2, "plan.steps[2].parallel[0].parallel[0]")
	add("g-a", 2, "plan.steps[2].parallel[0]")
	var got []string
	var depths []int
	for _, n := range Order(steps) {
		got = append(got, ids[n.I])
		depths = append(depths, n.Depth)
		if d := Depth(steps[n.I].Path); d != n.Depth {
			t.Errorf("Depth(%q) = %d, Order says %d", steps[n.I].Path, d, n.Depth)
		}
	}
	want := []string{"first", "loop", "it2", "it10", "g", "g-a", "g-a-x", "g-b", "last"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 0, 1, 1, 0, 1, 2, 1, 0}, depths); diff != "" {
		t.Errorf("depths (-want +got):\n%s", diff)
	}
}

// TestAxis places bars by their start and duration on an axis from the
// run's start to the latest end, a running step's to the axis's end, and
// none for a step that never started.
func TestAxis(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []Step{
		{Path: "plan.steps[0]", Start: at(0), Duration: 250 * time.Millisecond},
		{Path: "plan.steps[1]", Index: 1, Start: at(500), Duration: 1500 * time.Millisecond}, // ends after the run
		{Path: "plan.steps[2]", Index: 2, Start: at(1000), Running: true},
		{Path: "plan.steps[3]", Index: 3},
	}
	end := Latest(at(1000), steps)
	if !end.Equal(at(2000)) {
		t.Fatalf("Latest = %s, want the end of the step that ended last, 2s in", end.Sub(t0))
	}
	axis := NewAxis(t0, end)
	type bar struct {
		From, To float64
		OK       bool
	}
	var got []bar
	for _, s := range steps {
		from, to, ok := axis.Bar(s)
		got = append(got, bar{from, to, ok})
	}
	want := []bar{{0, 0.125, true}, {0.25, 1, true}, {0.5, 1, true}, {0, 0, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bars (-want +got):\n%s", diff)
	}
	if p := axis.Pos(at(-100)); p != 0 {
		t.Errorf("Pos before the start = %g, want 0", p)
	}
	if a := NewAxis(t0, t0); a.Span != time.Millisecond {
		t.Errorf("an empty run's span is %s, want the 1ms floor", a.Span)
	}
}

func TestFormatMS(t *testing.T) {
	for ms, want := range map[int64]string{0: "0 ms", 999: "999 ms", 1000: "1 s", 1500: "1.5 s", 61_400: "1m1s"} {
		if got := FormatMS(ms); got != want {
			t.Errorf("FormatMS(%d) = %q, want %q", ms, got, want)
		}
	}
}
