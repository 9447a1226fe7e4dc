package viewer

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/internal/timeline"
	"github.com/orchestra-mcp/orchestra/store"
)

// The Gantt chart of a run. Every step is a row, in plan order, a group's
// children and a loop's iterations under it, an agent's run (its model
// turns and tool calls) under the agent's step; each started step is a bar
// from its start to its end on one time axis, from the run's start to its
// end (or now, while it runs), so that what ran side by side overlaps and
// a wait is a gap. Pauses are bands across every row.

// Geometry of the chart, in pixels.
const (
	labelWidth = 240 // the step labels, left of the plot
	plotWidth  = 600 // the time axis
	tailWidth  = 48  // right of the plot: attempts
	axisHeight = 28  // the time axis's ticks, above the rows
	rowHeight  = 22
	barHeight  = 14
	minBar     = 2 // a step shorter than a pixel still shows
	indent     = 14
)

// chart is what the template draws.
type chart struct {
	Width, Height int
	LabelWidth    int
	PlotWidth     int
	PlotTop       int
	PlotHeight    int
	Start         time.Time
	Span          time.Duration
	Rows          []chartRow
	Ticks         []tick
	Pauses        []band
}

// chartRow is one step.
type chartRow struct {
	Y, TextY, BarY int
	LabelX         int
	Label          string
	Note           string // tool, or what the step is
	Kind, Status   string
	Run, Step      string // the exec id of the run the step is in, and its id
	Bar            bool
	X, W           float64 // of the bar, from the chart's left
	TailX          float64 // right of the bar
	BarH           int
	Attempts       int
	Title          string
	Selected       bool
	Href           string // the run's page with the step's detail
	DetailURL      string // the step's detail alone, for the script
}

// tick is a mark of the time axis.
type tick struct {
	X     float64
	Label string
}

// band is a pause.
type band struct {
	X, W  float64
	Title string
}

// runTree is a run with its steps and the runs it started.
type runTree struct {
	run      *store.Run
	steps    []store.StepRecord
	children []*runTree
}

// buildChart lays out the chart of t as of now.
func buildChart(t *runTree, pauses []store.PauseEvent, now time.Time) *chart {
	c := &chart{LabelWidth: labelWidth, PlotWidth: plotWidth, PlotTop: axisHeight, Start: t.run.StartedAt}
	end := runEnd(t, now)
	axis := timeline.NewAxis(c.Start, end)
	c.Span = axis.Span
	xOf := func(at time.Time) float64 { return labelWidth + axis.Pos(at)*plotWidth }

	var add func(t *runTree, depth int)
	add = func(t *runTree, depth int) {
		unmatched := slices.Clone(t.children)
		spans := spansOf(t.steps)
		for _, n := range timeline.Order(spans) {
			st := t.steps[n.I]
			r := chartRow{Label: st.StepID, Kind: st.Kind, Status: st.Status, Run: t.run.ExecID, Step: st.StepID,
				LabelX: 8 + (depth+n.Depth)*indent, Attempts: st.Attempts, BarH: barHeight}
			r.Note = stepNote(st)
			if from, to, ok := axis.Bar(spans[n.I]); ok {
				r.Bar = true
				r.X = labelWidth + from*plotWidth
				r.W = math.Max(minBar, (to-from)*plotWidth)
				if st.Kind == "parallel" || st.Kind == "for_each" {
					r.BarH = barHeight / 2
				}
			}
			r.Title = stepTitle(st, t.run.ExecID != "" && t.run.ParentExecID != "")
			c.Rows = append(c.Rows, r)
			if child := takeChild(&unmatched, st); child != nil {
				add(child, depth+n.Depth+1)
			}
		}
		for _, child := range unmatched {
			c.Rows = append(c.Rows, chartRow{Label: "run " + shortID(child.run.ExecID), Note: child.run.Tool, Kind: "run",
				Status: string(child.run.Status), Run: child.run.ExecID, LabelX: 8 + depth*indent, BarH: barHeight / 2,
				Bar: true, X: xOf(child.run.StartedAt), W: math.Max(minBar, xOf(runEnd(child, now))-xOf(child.run.StartedAt)),
				Title: "a run this run started: " + child.run.Tool})
			add(child, depth+1)
		}
	}
	add(t, 0)

	for i := range c.Rows {
		r := &c.Rows[i]
		r.Y = axisHeight + i*rowHeight
		r.TextY = r.Y + rowHeight/2 + 4
		r.BarY = r.Y + (rowHeight-r.BarH)/2
		r.TailX = r.X + r.W + 4
		r.Label, r.Note = textcut.Ellipsis(r.Label, 32), textcut.Ellipsis(r.Note, 28)
	}
	c.PlotHeight = max(len(c.Rows), 1) * rowHeight
	c.Height = axisHeight + c.PlotHeight + 8
	c.Width = labelWidth + plotWidth + tailWidth
	c.Ticks = ticks(c.Span, plotWidth/float64(c.Span))
	c.Pauses = pauseBands(pauses, end, xOf)
	return c
}

// spansOf gives the timeline the steps of a run.
func spansOf(steps []store.StepRecord) []timeline.Step {
	out := make([]timeline.Step, len(steps))
	for i, st := range steps {
		out[i] = timeline.Step{Path: st.Path, Index: st.Index, Start: st.StartedAt,
			Duration: time.Duration(st.DurationMS) * time.Millisecond, Running: st.Status == "running"}
	}
	return out
}

// runEnd is where the chart's time axis ends: the run's end, or now while
// it runs, and never before a step of it or of a run it started ended.
func runEnd(t *runTree, now time.Time) time.Time {
	end := t.run.FinishedAt
	if end.IsZero() {
		end = t.run.StartedAt.Add(time.Duration(t.run.DurationMS) * time.Millisecond)
	}
	if t.run.Status == store.StatusRunning || t.run.Status == store.StatusPaused {
		end = now
	}
	end = timeline.Latest(end, spansOf(t.steps))
	for _, child := range t.children {
		if e := runEnd(child, now); e.After(end) {
			end = e
		}
	}
	return end
}

// takeChild removes from children and returns the run that step st
// started: an agent step's (or a nested orchestration's) run has the
// step's tool and started within it; the earliest such run is taken, so
// that a loop's iterations each get their own.
func takeChild(children *[]*runTree, st store.StepRecord) *runTree {
	if st.StartedAt.IsZero() || st.Tool == "" {
		return nil
	}
	best := -1
	for i, c := range *children {
		if c.run.Tool != st.Tool || c.run.StartedAt.Before(st.StartedAt) {
			continue
		}
		if st.Status != "running" && st.DurationMS >= 0 &&
			c.run.StartedAt.After(st.StartedAt.Add(time.Duration(st.DurationMS+1)*time.Millisecond)) {
			continue
		}
		if best < 0 || c.run.StartedAt.Before((*children)[best].run.StartedAt) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	c := (*children)[best]
	*children = slices.Delete(*children, best, best+1)
	return c
}

// stepNote says what a step called.
func stepNote(st store.StepRecord) string {
	switch st.Kind {
	case "parallel":
		return "parallel group"
	case "for_each":
		return "loop"
	case "model":
		return "model turn · " + st.Tool
	}
	return st.Tool
}

// stepTitle is a bar's tooltip.
func stepTitle(st store.StepRecord, inAgent bool) string {
	var b strings.Builder
	b.WriteString(st.StepID)
	if note := stepNote(st); note != "" {
		b.WriteString(" · " + note)
	}
	b.WriteString(" · " + st.Status)
	if !st.StartedAt.IsZero() {
		fmt.Fprintf(&b, " · %s", timeline.FormatMS(st.DurationMS))
	}
	if st.Attempts > 1 {
		fmt.Fprintf(&b, " · %d attempts", st.Attempts)
	}
	if inAgent {
		b.WriteString(" · in the agent's run")
	}
	return b.String()
}

// ticks marks the axis at a round interval, about eight times.
func ticks(span time.Duration, scale float64) []tick {
	ms := float64(span) / float64(time.Millisecond)
	step := niceStep(ms / 8)
	var out []tick
	for v := 0.0; v <= ms+step/1000; v += step {
		out = append(out, tick{X: labelWidth + v*float64(time.Millisecond)*scale, Label: timeline.FormatMS(int64(math.Round(v)))})
	}
	return out
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// pauseBands draws the pauses: from each "paused" to the resume or expiry
// after it, or to the end while the run is paused.
func pauseBands(events []store.PauseEvent, end time.Time, xOf func(time.Time) float64) []band {
	var out []band
	for i, ev := range events {
		if ev.Event != "paused" {
			continue
		}
		until, how := end, "still waiting"
		if i+1 < len(events) {
			until, how = events[i+1].At, events[i+1].Event
		}
		x := xOf(ev.At)
		out = append(out, band{X: x, W: math.Max(minBar, xOf(until)-x),
			Title: fmt.Sprintf("paused for the client's results for %s (%s)", timeline.FormatMS(until.Sub(ev.At).Milliseconds()), how)})
	}
	return out
}

// shortID is the first part of an exec id.
func shortID(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}
