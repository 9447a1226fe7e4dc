package cli

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/internal/timeline"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

// timelineColumns is how many columns the timeline's axis spans.
const timelineColumns = 50

// maxLabel caps a timeline row's label, its indentation included.
const maxLabel = 32

// stepsInOrder returns ex's step records in plan order (a group's children
// and a loop's iterations under it), each with its nesting depth, and the
// timeline's view of each.
func stepsInOrder(ex server.Execution) ([]timeline.Node, []timeline.Step) {
	spans := make([]timeline.Step, len(ex.Records))
	for i, s := range ex.Records {
		spans[i] = timeline.Step{Path: s.Path, Index: s.Index, Duration: time.Duration(s.DurationMS) * time.Millisecond,
			Running: s.Status == string(store.StatusRunning)}
		if s.StartedAt != nil {
			spans[i].Start = *s.StartedAt
		}
	}
	return timeline.Order(spans), spans
}

// printTimeline prints a text Gantt chart of ex's steps: a row per step in
// plan order, and each step that started a bar scaled to the run's
// duration, so that steps that ran side by side overlap and a wait is a
// gap. A running run's axis ends now.
func printTimeline(w io.Writer, ex server.Execution, now time.Time) {
	if len(ex.Records) == 0 {
		return
	}
	order, spans := stepsInOrder(ex)
	end := ex.StartedAt.Add(time.Duration(ex.DurationMS) * time.Millisecond)
	if ex.FinishedAt != nil {
		end = *ex.FinishedAt
	}
	if ex.Status == string(store.StatusRunning) || ex.Status == string(store.StatusPaused) {
		end = now
	}
	started := false
	for _, s := range spans {
		started = started || !s.Start.IsZero()
	}
	if !started {
		fmt.Fprintln(w, "\ntimeline: no step started")
		return
	}
	axis := timeline.NewAxis(ex.StartedAt, timeline.Latest(end, spans))

	labels := make([]string, len(order))
	width := 0
	for k, n := range order {
		labels[k] = textcut.Ellipsis(strings.Repeat("  ", n.Depth)+ex.Records[n.I].StepID, maxLabel)
		width = max(width, utf8.RuneCountInString(labels[k]))
	}
	column := axis.Span / timelineColumns
	fmt.Fprintf(w, "\ntimeline: %s from the run's start, %s a column\n", roundDuration(axis.Span), roundDuration(column))
	for k, n := range order {
		s := ex.Records[n.I]
		bar := []rune(strings.Repeat(" ", timelineColumns))
		tail := s.Status
		if from, to, ok := axis.Bar(spans[n.I]); ok {
			first := min(int(from*timelineColumns), timelineColumns-1)
			last := min(max(int(math.Ceil(to*timelineColumns-1e-9)), first+1), timelineColumns)
			for c := first; c < last; c++ {
				bar[c] = '█'
			}
			tail = (time.Duration(s.DurationMS) * time.Millisecond).String()
			if spans[n.I].Running {
				tail = "running"
			}
		}
		fmt.Fprintf(w, "%-*s |%s| %s\n", width+(len(labels[k])-utf8.RuneCountInString(labels[k])), labels[k], string(bar), tail)
	}
}

// roundDuration rounds d for the timeline's header to two or three
// significant digits: 4.2s, 84ms, 120µs.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
