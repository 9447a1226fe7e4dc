package termview

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// Mode is how a [View] draws.
type Mode int

const (
	// Off draws nothing.
	Off Mode = iota
	// Live keeps a row per step on screen and redraws the rows in place
	// with the terminal's cursor control.
	Live
	// Lines writes one plain line per event, with no cursor control and
	// no color.
	Lines
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case Live:
		return "live"
	case Lines:
		return "lines"
	}
	return "off"
}

// Detect says how to draw on w: [Live] on a terminal, [Lines] on a
// terminal that cannot move its cursor (TERM=dumb) or whose user asked for
// plain output (NO_COLOR, https://no-color.org), and [Off] when w is not
// a terminal. getenv reads the environment (os.Getenv).
func Detect(w io.Writer, getenv func(string) string) Mode {
	f, ok := w.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return Off
	}
	if getenv("TERM") == "dumb" || getenv("NO_COLOR") != "" {
		return Lines
	}
	return Live
}

// Options configure a View.
type Options struct {
	// Mode is how the view draws; Off makes a view that draws nothing.
	Mode Mode
	// Width is the width of a [Live] view's rows when its writer is not a
	// terminal; on a terminal, the terminal's width. Default 100.
	Width int
	// Refresh is how often a [Live] view redraws; default 150ms.
	Refresh time.Duration
	// Now tells the time, for the elapsed times of running steps; default
	// time.Now.
	Now func() time.Time
}

// View shows the runs its hooks report on a terminal. Its methods are
// safe for concurrent use; its hooks never wait for the terminal.
type View struct {
	mode Mode
	out  io.Writer
	now  func() time.Time

	mu    sync.Mutex // guards what follows, and every row
	runs  map[string]*runState
	roots int // runs drawn at the top level so far
	start time.Time
	live  *live // nil unless Live

	wmu       sync.Mutex // serializes writes to out
	closed    bool       // guarded by wmu
	closeOnce sync.Once
}

// New returns a view that draws on w (a terminal, normally stderr).
func New(w io.Writer, opts Options) *View {
	v := &View{mode: opts.Mode, out: w, now: opts.Now, runs: map[string]*runState{}}
	if v.now == nil {
		v.now = time.Now
	}
	if v.mode == Live {
		v.live = startLive(v, w, opts)
	}
	return v
}

// Mode returns how the view draws.
func (v *View) Mode() Mode { return v.mode }

// Hooks returns the engine hooks that feed the view; nil for a view that
// draws nothing.
func (v *View) Hooks() *orchestrate.Hooks {
	if v.mode == Off {
		return nil
	}
	return &orchestrate.Hooks{
		RunStarted:   func(i orchestrate.RunStartedInfo) { v.runStarted(i.Run, i.At, i.Planning, false) },
		PlanReady:    v.planReady,
		StepStarted:  v.stepStarted,
		StepProgress: v.stepProgress,
		StepEnded:    v.stepEnded,
		RunPaused:    v.runPaused,
		RunResumed:   func(i orchestrate.RunResumedInfo) { v.runStarted(i.Run, i.At, false, true) },
		RunFinished:  v.runFinished,
	}
}

// Writer returns a writer for lines that must not tear the view, such as
// logs: while a [Live] view draws they appear above its rows; otherwise
// they go straight to the view's writer.
func (v *View) Writer() io.Writer { return viewWriter{v} }

type viewWriter struct{ v *View }

func (w viewWriter) Write(p []byte) (int, error) {
	v := w.v
	v.wmu.Lock()
	defer v.wmu.Unlock()
	if v.live != nil && !v.closed {
		return v.live.write(p)
	}
	return v.out.Write(p)
}

// writeLine writes one line of a [Lines] view.
func (v *View) writeLine(s string) {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	if !v.closed {
		io.WriteString(v.out, s+"\n")
	}
}

// Close draws the last frame and stops: a [Live] view's rows stay on
// screen as they were last drawn (a step still running when the view
// closes keeps its elapsed time). What is written after goes straight to
// the view's writer. Close is idempotent.
func (v *View) Close() {
	v.closeOnce.Do(func() {
		if v.live != nil {
			v.live.stop()
		}
		v.wmu.Lock() // nothing is written while the last frame is drawn
		defer v.wmu.Unlock()
		v.closed = true
		if v.live != nil {
			v.live.close()
		}
	})
}

// livePrefs are the mpb options of a Live view on w.
func livePrefs(w io.Writer, opts Options) []mpb.ContainerOption {
	width := opts.Width
	if width <= 0 {
		width = 100
	}
	refresh := opts.Refresh
	if refresh <= 0 {
		refresh = 150 * time.Millisecond
	}
	return []mpb.ContainerOption{mpb.WithOutput(w), mpb.WithWidth(width), mpb.WithRefreshRate(refresh)}
}
