package termview

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// live draws a View's rows with mpb, a bar per row. The hooks only queue
// what changed; one goroutine makes and ends the bars, so that a hook
// never waits for the terminal.
type live struct {
	v *View
	p *mpb.Progress

	mu    sync.Mutex // guards queue
	queue []liveOp
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}

	// keep is the last row, a hint while the view draws, which only Close
	// ends (and removes): until then mpb keeps drawing, so that whatever
	// is written through the view is drawn before it stops.
	keep *mpb.Bar
}

// liveOp is a change the goroutine applies: a row to show, or one that
// ended.
type liveOp struct {
	r     *row
	ended bool
}

func startLive(v *View, w io.Writer, opts Options) *live {
	l := &live{v: v, p: mpb.New(livePrefs(w, opts)...), wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// show queues r to get a bar (with v.mu held).
func (l *live) show(r *row) { l.push(liveOp{r: r}) }

// finish queues the end of r's bar (with v.mu held).
func (l *live) finish(r *row) { l.push(liveOp{r: r, ended: true}) }

func (l *live) push(op liveOp) {
	l.mu.Lock()
	l.queue = append(l.queue, op)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// loop applies the queued changes until quit.
func (l *live) loop() {
	defer close(l.done)
	for {
		select {
		case <-l.wake:
			l.apply()
		case <-l.quit:
			l.apply()
			return
		}
	}
}

// apply makes and ends bars as queued.
func (l *live) apply() {
	l.mu.Lock()
	ops := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, op := range ops {
		r := op.r
		if r.bar == nil {
			l.makeBar(r)
		}
		if op.ended && !r.barEnd {
			r.barEnd = true
			r.bar.SetTotal(-1, true) // complete: drawn once more as it ended, then kept
		}
	}
}

// makeBar makes the bar of r: its columns are the status mark, the label
// indented under its group, the tool, the status and the elapsed time,
// aligned across rows; then a progress bar when its tool reports one, and
// what else there is to say (counts, the error).
func (l *live) makeBar(r *row) {
	if l.keep == nil {
		l.v.wmu.Lock() // writes through the view go above the rows from now on
		l.keep = l.p.New(0, mpb.NopStyle(), mpb.BarPriority(math.MaxInt32), mpb.BarRemoveOnComplete(),
			mpb.PrependDecorators(decor.Meta(decor.Name("  ctrl-c cancels"), dim)))
		l.v.wmu.Unlock()
	}
	v := l.v
	v.mu.Lock()
	prio := r.prio
	v.mu.Unlock()
	col := func(f func(*row) string, c int) decor.Decorator {
		return decor.Any(func(decor.Statistics) string {
			v.mu.Lock()
			defer v.mu.Unlock()
			return f(r)
		}, decor.WC{C: c})
	}
	r.bar = l.p.New(0, progressStyle{v: v, r: r},
		mpb.BarPriority(prio),
		mpb.PrependDecorators(
			decor.Meta(col(v.mark, decor.DindentRight|decor.DextraSpace), colorOf),
			col(func(r *row) string { return strings.Repeat("  ", r.depth) + r.label }, decor.DSyncWidthR|decor.DextraSpace),
			col(func(r *row) string { return r.note }, decor.DSyncWidthR|decor.DextraSpace),
			col(func(r *row) string { return r.status }, decor.DSyncWidthR|decor.DextraSpace),
			col(v.elapsedOf, decor.DSyncWidth),
		),
		mpb.AppendDecorators(col(detail, 0)),
	)
}

// write writes p above the rows (with v.wmu held).
func (l *live) write(p []byte) (int, error) {
	if l.keep == nil {
		return l.v.out.Write(p) // no rows yet: nothing to draw around
	}
	return l.p.Write(p)
}

// stop applies what is queued and stops the goroutine that makes bars.
func (l *live) stop() {
	close(l.quit)
	<-l.done
}

// close ends the view (after stop, with v.wmu held): the rows that have
// not ended are kept as they are, the hint is removed, and the last frame
// drawn.
func (l *live) close() {
	if l.keep == nil {
		l.p.Shutdown()
		return
	}
	l.keep.SetTotal(-1, true)
	l.p.Wait()
}

// spinner is the mark of a running row, a frame per tenth of a second.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// mark is r's status mark (with v.mu held).
func (v *View) mark(r *row) string {
	switch {
	case !r.ended && r.start.IsZero():
		return "·"
	case !r.ended:
		return spinner[int(v.now().UnixMilli()/100)%len(spinner)]
	}
	switch r.status {
	case orchestrate.StatusSuccess:
		return "✓"
	case orchestrate.StatusPartial:
		return "!"
	case orchestrate.StatusSkipped:
		return "-"
	case orchestrate.StatusRunning, "waiting", "paused":
		return "…" // a view closed while it ran, or a pause
	}
	return "✗"
}

// elapsedOf is r's elapsed time (with v.mu held): so far while it runs,
// its duration once it ended, nothing if it never started.
func (v *View) elapsedOf(r *row) string {
	switch {
	case r.ended && r.start.IsZero():
		return ""
	case r.ended:
		return elapsed(r.dur)
	case r.start.IsZero():
		return ""
	}
	return elapsed(v.now().Sub(r.start))
}

// detail is what else there is to say about r (with v.mu held).
func detail(r *row) string {
	var parts []string
	switch {
	case r.run != nil:
		if rs := r.run; rs.leaves > 0 && r.status != "planning" {
			parts = append(parts, fmt.Sprintf("%d of %s done", rs.done, plural(rs.leaves, "tool step")))
		}
	case r.kind == kindGroup && r.kids > 0:
		parts = append(parts, fmt.Sprintf("%d of %d done", r.kidsDone, r.kids))
	case r.kind == orchestrate.TypeForEach:
		parts = append(parts, plural(r.itersDone, "iteration")+" done")
		if r.itersRunning > 0 {
			parts = append(parts, fmt.Sprintf("%d running", r.itersRunning))
		}
		if r.itersFailed > 0 {
			parts = append(parts, fmt.Sprintf("%d not done", r.itersFailed))
		}
	}
	if r.turns > 0 {
		parts = append(parts, plural(r.turns, "model turn"))
	}
	if r.calls > 0 || r.callsRunning > 0 {
		parts = append(parts, plural(r.calls, "tool call"))
	}
	if r.calling != "" && !r.ended {
		parts = append(parts, "calling "+r.calling)
	}
	if r.hasProg && !r.ended {
		parts = append(parts, progressText(r.prog))
	}
	if r.fail != "" {
		parts = append(parts, r.fail)
	}
	return strings.Join(parts, " · ")
}

// progressStyle draws a progress bar for a row whose tool reported a
// total, and nothing otherwise.
type progressStyle struct {
	v *View
	r *row
}

func (s progressStyle) Build() mpb.BarFiller {
	return progressFiller{s.v, s.r, mpb.BarStyle().Build()}
}

type progressFiller struct {
	v   *View
	r   *row
	bar mpb.BarFiller
}

func (f progressFiller) Fill(w io.Writer, st decor.Statistics) error {
	f.v.mu.Lock()
	p, show := f.r.prog, f.r.hasProg && f.r.prog.Total > 0 && !f.r.ended
	f.v.mu.Unlock()
	if !show {
		return nil
	}
	const scale = 1000
	st.RequestedWidth = 24
	st.Total, st.Current = scale, int64(scale*min(max(p.Progress/p.Total, 0), 1))
	st.Completed = false
	return f.bar.Fill(w, st)
}

// SGR colors of the marks.
const (
	green  = "\x1b[32m"
	red    = "\x1b[31m"
	yellow = "\x1b[33m"
	cyan   = "\x1b[36m"
	faint  = "\x1b[2m"
	reset  = "\x1b[0m"
)

// colorOf colors a mark.
func colorOf(mark string) string {
	c := cyan
	switch strings.TrimSpace(mark) {
	case "✓":
		c = green
	case "✗":
		c = red
	case "!", "…":
		c = yellow
	case "-", "·":
		c = faint
	}
	return c + mark + reset
}

// dim makes a hint faint.
func dim(s string) string { return faint + s + reset }
