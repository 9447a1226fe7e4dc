package timeline

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Step is one step of a run, as the timeline needs it.
type Step struct {
	// Path is where the step is in the plan, such as plan.steps[1] or
	// plan.steps[1].parallel[0] or plan.steps[2].do[10]: the order and
	// nesting come from it.
	Path string
	// Index is the top-level index of the step, or of the step it is under.
	Index int
	// Start is when the step started; zero if it never did.
	Start time.Time
	// Duration is how long the step took.
	Duration time.Duration
	// Running says the step has not ended: its bar reaches the axis's end.
	Running bool
}

// end is when s ended, by its start and duration.
func (s Step) end() time.Time { return s.Start.Add(s.Duration) }

// Node is a step in plan order.
type Node struct {
	// I is the step's position in the slice given to [Order].
	I int
	// Depth is how deeply the step is nested in groups and loops: 0 for
	// a top-level step.
	Depth int
}

// Order returns the steps in plan order: each group's children and each
// loop's iterations after it, in their own order (numerically: do[10]
// after do[9]), whatever order steps are in.
func Order(steps []Step) []Node {
	type parsed struct {
		i    int
		segs []segment
	}
	ps := make([]parsed, len(steps))
	for i, st := range steps {
		ps[i] = parsed{i, parsePath(st.Path)}
	}
	slices.SortStableFunc(ps, func(a, b parsed) int {
		if c := cmp.Compare(steps[a.i].Index, steps[b.i].Index); c != 0 {
			return c
		}
		for k := 0; k < len(a.segs) && k < len(b.segs); k++ {
			if c := cmp.Compare(a.segs[k].name, b.segs[k].name); c != 0 {
				return c
			}
			if c := cmp.Compare(a.segs[k].n, b.segs[k].n); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(a.segs), len(b.segs))
	})
	out := make([]Node, len(ps))
	for k, p := range ps {
		out[k] = Node{I: p.i, Depth: nesting(p.segs)}
	}
	return out
}

// Depth returns how deeply the step at path is nested in groups and
// loops: 0 for plan.steps[1], 1 for plan.steps[1].parallel[0].
func Depth(path string) int { return nesting(parsePath(path)) }

// nesting counts the segments of a path that enter a group or a loop.
func nesting(segs []segment) int {
	depth := 0
	for _, s := range segs {
		if s.name == "parallel" || s.name == "do" {
			depth++
		}
	}
	return depth
}

// segment is one segment of a step's path: name[n].
type segment struct {
	name string
	n    int
}

// parsePath splits plan.steps[1].parallel[0] into its indexed segments.
func parsePath(path string) []segment {
	var segs []segment
	for part := range strings.SplitSeq(path, ".") {
		name, rest, ok := strings.Cut(part, "[")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		if err != nil {
			continue
		}
		segs = append(segs, segment{name, n})
	}
	return segs
}

// Latest returns the later of end and the end of every step that started:
// a run's axis never ends before one of its steps did.
func Latest(end time.Time, steps []Step) time.Time {
	for _, st := range steps {
		if !st.Start.IsZero() {
			if e := st.end(); e.After(end) {
				end = e
			}
		}
	}
	return end
}

// Axis is a run's time axis: from its start over its span.
type Axis struct {
	Start time.Time
	Span  time.Duration
}

// NewAxis returns the axis from start to end, never shorter than a
// millisecond.
func NewAxis(start, end time.Time) Axis {
	return Axis{Start: start, Span: max(end.Sub(start), time.Millisecond)}
}

// Pos returns where t lies on the axis as a fraction of its span: 0 at
// its start, and for anything before it; 1 at its end.
func (a Axis) Pos(t time.Time) float64 {
	return max(0, float64(t.Sub(a.Start))/float64(a.Span))
}

// Bar returns where the bar of s starts and ends on the axis, as
// fractions of its span; ok is false for a step that never started. A
// running step's bar reaches the axis's end.
func (a Axis) Bar(s Step) (from, to float64, ok bool) {
	if s.Start.IsZero() {
		return 0, 0, false
	}
	from, to = a.Pos(s.Start), a.Pos(s.end())
	if s.Running {
		to = 1
	}
	return from, max(from, to), true
}

// FormatMS says a duration in milliseconds for a person: 250 ms, 1.5 s,
// 2m3s.
func FormatMS(ms int64) string {
	switch {
	case ms < 1000:
		return strconv.FormatInt(ms, 10) + " ms"
	case ms < 60_000:
		return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}
