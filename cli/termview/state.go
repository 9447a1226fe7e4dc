package termview

import (
	"fmt"
	"strings"
	"time"

	"github.com/vbauerster/mpb/v8"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/internal/timeline"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// Kinds of rows besides the step types of orchestrate.StepRecord.
const (
	kindRun   = "run"      // a run: the plan, or a run no step is known to have started
	kindGroup = "parallel" // a parallel group
)

// row is one line of the view: a run, or a step of a run (a loop stands
// for its iterations, and an agent's step for its run).
type row struct {
	prio   int // rows are drawn by priority, lowest first
	depth  int // nesting under groups and loops
	label  string
	note   string // the tool, or what the step is
	kind   string // a step type, or kindRun
	start  time.Time
	status string // running, a step's final status, planning, paused...
	ended  bool
	dur    time.Duration
	fail   string // the error of a step that did not succeed

	kids, kidsDone int // a group's children, and those that ended

	// A loop's iterations.
	itersRunning, itersDone, itersFailed int

	// The model turns and tool calls of the runs an agent's step (or a
	// run shown on its own) started.
	turns, calls, callsRunning int
	calling                    string // a tool call running now

	prog    registry.Progress // the last progress a tool reported
	hasProg bool

	run *runState // set on a run's own row

	bar    *mpb.Bar // Live: the row's bar, once made
	barEnd bool     // Live: the bar was told the row ended
}

// runState is what the view knows of one run.
type runState struct {
	id     string
	self   *row            // the run's own row, if it has one
	agg    *row            // the row the steps of a run started by a step count on
	steps  map[string]*row // its steps' rows, by path
	order  map[string]int  // the plan order of its steps, by path
	groups map[string]int  // how many children each group has, by path
	active []*activeStep   // its tool steps running now
	base   int             // the priority of its own row; its steps' follow
	extra  int             // rows made outside the plan's order so far
	leaves int             // tool steps of the plan, as the engine counts them
	done   int             // tool steps that ended
	start  time.Time
}

// activeStep is a tool step running now, which may start a run of its
// own (an agent's): that run's steps count on row.
type activeStep struct {
	tool  string
	start time.Time
	row   *row
	taken bool
}

// Rows of runs drawn at the top level are this far apart in priority;
// rows of runs started by no known step come after the plan's.
const (
	runSpan  = 1 << 20
	orphanAt = 1 << 19
)

// runStarted is RunStarted, and RunResumed when resumed is set.
func (v *View) runStarted(info *orchestrate.RunInfo, at time.Time, planning, resumed bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.start.IsZero() {
		v.start = at
	}
	rs := &runState{id: info.ExecID, steps: map[string]*row{}, start: at}
	v.runs[info.ExecID] = rs
	parent := v.runs[info.ParentExecID]
	if info.ParentExecID != "" && parent != nil {
		// A run a step started (an agent's): its steps count on that
		// step's row, or on a row of its own when no step is known to
		// have started it.
		if parent.agg != nil {
			rs.agg = parent.agg
			return
		}
		if a := parent.claim(info.Source, at); a != nil {
			rs.agg = a.row
			return
		}
		r := &row{prio: parent.base + orphanAt + parent.extra, depth: 1, label: info.Source, note: "run", kind: kindRun,
			start: at, status: orchestrate.StatusRunning}
		parent.extra++
		rs.agg = r
		v.show(r)
		v.event(at, 1, "%s: run started", info.Source)
		return
	}
	rs.base = v.roots * runSpan
	v.roots++
	rs.self = &row{prio: rs.base, label: "plan", kind: kindRun, start: at, status: orchestrate.StatusRunning, run: rs}
	rs.planned(info.Plan, info.Steps())
	switch {
	case planning:
		rs.self.status = "planning"
		v.event(at, 0, "planning: %s", oneLine(info.Goal, 80))
	case resumed:
		v.event(at, 0, "plan resumed")
	default:
		v.event(at, 0, "plan started: %s", plural(rs.leaves, "tool step"))
	}
	v.show(rs.self)
}

// planned learns the plan's order and groups.
func (rs *runState) planned(p *orchestrate.Plan, leaves int) {
	rs.leaves = leaves
	if p == nil || rs.order != nil {
		return
	}
	rs.order, rs.groups = map[string]int{}, map[string]int{}
	for i, s := range p.All() {
		rs.order[s.Path()] = i
		if s.IsGroup() {
			rs.groups[s.Path()] = len(s.Parallel)
		}
	}
}

// claim returns the earliest tool step of rs running tool since before
// at that no run claimed yet, and marks it claimed; nil if there is none.
func (rs *runState) claim(tool string, at time.Time) *activeStep {
	var best *activeStep
	for _, a := range rs.active {
		if a.taken || a.tool != tool || a.start.After(at) {
			continue
		}
		if best == nil || a.start.Before(best.start) {
			best = a
		}
	}
	if best != nil {
		best.taken = true
	}
	return best
}

// release forgets a tool step of rs that ended.
func (rs *runState) release(r *row, tool string) {
	for i, a := range rs.active {
		if a.row == r && a.tool == tool {
			rs.active = append(rs.active[:i], rs.active[i+1:]...)
			return
		}
	}
}

func (v *View) planReady(i orchestrate.PlanReadyInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs := v.runs[i.Run.ExecID]
	if rs == nil || rs.self == nil {
		return
	}
	rs.planned(i.Plan, i.Run.Steps())
	if rs.self.status == "planning" {
		rs.self.status = orchestrate.StatusRunning
		if p := i.Planner; p != nil {
			rs.self.note = "planned by " + p.Model
			v.event(i.At, 0, "planned %s with %s (%s) in %s", plural(rs.leaves, "tool step"), p.Model,
				plural(p.ModelCalls, "model call"), elapsed(i.At.Sub(rs.start)))
		}
	}
}

// loopOf returns the path of the loop whose iteration path is in, if it
// is in one: plan.steps[2] for plan.steps[2].do[0].parallel[1].
func loopOf(path string) (string, bool) {
	i := strings.Index(path, ".do[")
	if i < 0 {
		return "", false
	}
	return path[:i], true
}

// parentOf returns the path of the group or loop the step at path is
// directly in.
func parentOf(path string) string {
	if i := strings.LastIndexByte(path, '.'); i > 0 {
		return path[:i]
	}
	return ""
}

func (v *View) stepStarted(i orchestrate.StepStartedInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs := v.runs[i.Run.ExecID]
	if rs == nil {
		return
	}
	s := i.Step
	if rs.agg != nil {
		// A step of an agent's run: its tool calls and model turns count
		// on the agent's row.
		if s.Type == "tool" {
			rs.agg.callsRunning++
			rs.agg.calling = s.Tool
			rs.active = append(rs.active, &activeStep{tool: s.Tool, start: i.At, row: rs.agg})
		}
		return
	}
	if loop, ok := loopOf(s.Path); ok {
		lr := rs.steps[loop]
		if lr == nil {
			return
		}
		if s.Iteration != nil {
			lr.itersRunning++
		}
		if s.Tool != "" {
			rs.active = append(rs.active, &activeStep{tool: s.Tool, start: i.At, row: lr})
		}
		v.event(i.At, timeline.Depth(s.Path), "%s started", stepName(s))
		return
	}
	r := rs.stepRow(s)
	r.start, r.status = i.At, orchestrate.StatusRunning
	if s.StartedAt != nil {
		r.start = *s.StartedAt
	}
	if s.Tool != "" {
		rs.active = append(rs.active, &activeStep{tool: s.Tool, start: r.start, row: r})
	}
	v.event(i.At, r.depth, "%s started", stepName(s))
	v.show(r)
}

// stepRow returns the row of step s, made if it has none yet.
func (rs *runState) stepRow(s *orchestrate.StepRecord) *row {
	if r := rs.steps[s.Path]; r != nil {
		return r
	}
	r := &row{label: s.ID, kind: s.Type, depth: timeline.Depth(s.Path), status: orchestrate.StatusPending}
	if n, ok := rs.order[s.Path]; ok {
		r.prio = rs.base + 1 + n
	} else {
		r.prio = rs.base + 1 + len(rs.order) + rs.extra
		rs.extra++
	}
	switch s.Type {
	case kindGroup:
		r.note, r.kids = "parallel group", rs.groups[s.Path]
	case orchestrate.TypeForEach:
		r.note = "loop"
	default:
		r.note = s.Tool
	}
	rs.steps[s.Path] = r
	return r
}

func (v *View) stepProgress(i orchestrate.StepProgressInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs := v.runs[i.Run.ExecID]
	if rs == nil {
		return
	}
	r := rs.steps[i.Step.Path]
	if r == nil || r.ended {
		return
	}
	before, had := r.prog, r.hasProg
	r.prog, r.hasProg = i.Progress, true
	// A line when the message changes or the step gets a tenth further:
	// a tool may report far more often than anyone reads.
	if !had || i.Progress.Message != before.Message || tenth(i.Progress) != tenth(before) {
		v.event(i.At, r.depth, "%s: %s", stepName(i.Step), progressText(i.Progress))
	}
}

// tenth is how many tenths of its total a progress report reached, or -1
// without a total.
func tenth(p registry.Progress) int {
	if p.Total <= 0 {
		return -1
	}
	return int(10 * p.Progress / p.Total)
}

func (v *View) stepEnded(i orchestrate.StepEndedInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs := v.runs[i.Run.ExecID]
	if rs == nil {
		return
	}
	s := i.Step
	dur := time.Duration(s.DurationMS) * time.Millisecond
	if rs.agg != nil {
		agg := rs.agg
		switch s.Type {
		case "model":
			agg.turns++
			v.event(i.At, agg.depth+1, "%s: model turn %d (%s)", agg.label, agg.turns, s.Tool)
		case "tool":
			agg.calls++
			agg.callsRunning = max(agg.callsRunning-1, 0)
			if agg.callsRunning == 0 {
				agg.calling = ""
			}
			rs.release(agg, s.Tool)
			v.event(i.At, agg.depth+1, "%s: called %s: %s", agg.label, s.Tool, outcome(s, dur))
		}
		return
	}
	if s.Type != kindGroup && s.Type != orchestrate.TypeForEach {
		rs.done++
	}
	rs.leaves = i.Run.Steps()
	if loop, ok := loopOf(s.Path); ok {
		lr := rs.steps[loop]
		if lr == nil {
			return
		}
		rs.release(lr, s.Tool)
		if s.Iteration != nil && s.StartedAt != nil {
			lr.itersRunning = max(lr.itersRunning-1, 0)
			if s.Status == orchestrate.StatusSuccess {
				lr.itersDone++
			} else {
				lr.itersFailed++
			}
		}
		v.event(i.At, timeline.Depth(s.Path), "%s %s", stepName(s), outcome(s, dur))
		return
	}
	r := rs.stepRow(s)
	rs.release(r, s.Tool)
	r.status, r.dur, r.ended = s.Status, dur, true
	r.fail = failure(s)
	if g := rs.steps[parentOf(s.Path)]; g != nil && g.kind == kindGroup {
		g.kidsDone++
	}
	v.event(i.At, r.depth, "%s %s", stepName(s), outcome(s, dur))
	v.show(r) // a step that never started gets its row now
	v.finish(r)
}

func (v *View) runPaused(i orchestrate.RunPausedInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs := v.runs[i.Run.ExecID]
	if rs == nil || rs.self == nil {
		return
	}
	for _, r := range rs.steps {
		if !r.ended {
			r.status, r.ended = "waiting", true
			r.dur = i.At.Sub(r.start)
			v.finish(r)
		}
	}
	rs.self.status, rs.self.ended = "paused", true
	rs.self.dur = i.At.Sub(rs.self.start)
	rs.self.fail = "waiting for the client's results"
	v.event(i.At, 0, "plan paused: waiting for the client's results")
	v.finish(rs.self)
}

func (v *View) runFinished(i orchestrate.RunFinishedInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs := v.runs[i.Run.ExecID]
	if rs == nil {
		return
	}
	if rs.agg != nil {
		if rs.agg.kind == kindRun && !rs.agg.ended { // a run of its own row
			rs.agg.status, rs.agg.ended, rs.agg.dur = i.Envelope.Artifact.Status, true, i.At.Sub(rs.agg.start)
			v.event(i.At, 1, "%s: run %s in %s", rs.agg.label, rs.agg.status, elapsed(rs.agg.dur))
			v.finish(rs.agg)
		}
		return
	}
	if rs.self == nil {
		return
	}
	a := i.Envelope.Artifact
	r := rs.self
	r.status, r.ended = a.Status, true
	r.dur = time.Duration(i.Envelope.Metadata.DurationMS) * time.Millisecond
	if len(a.ValidationErrors) > 0 {
		r.fail = fmt.Sprintf("the plan is invalid (%s); nothing ran", plural(len(a.ValidationErrors), "problem"))
	}
	for _, sr := range rs.steps {
		if !sr.ended { // every step ends before the run: this is a safety net
			sr.ended = true
			v.finish(sr)
		}
	}
	v.event(i.At, 0, "plan %s in %s", r.status, elapsed(r.dur))
	v.finish(r)
}

// show makes r's bar in a Live view (once).
func (v *View) show(r *row) {
	if v.live != nil {
		v.live.show(r)
	}
}

// finish tells a Live view that r ended.
func (v *View) finish(r *row) {
	if v.live != nil {
		v.live.finish(r)
	}
}

// event writes a line of a Lines view: the time since the first run
// started, then text indented by depth.
func (v *View) event(at time.Time, depth int, format string, args ...any) {
	if v.mode != Lines {
		return
	}
	v.writeLine(fmt.Sprintf("[%6s] %s%s", elapsed(at.Sub(v.start)), strings.Repeat("  ", depth), fmt.Sprintf(format, args...)))
}

// stepName names a step in a line: its id and tool.
func stepName(s *orchestrate.StepRecord) string {
	switch {
	case s.Type == kindGroup:
		return s.ID + " (parallel group)"
	case s.Type == orchestrate.TypeForEach:
		return s.ID + " (loop)"
	case s.Tool != "":
		return s.ID + " (" + s.Tool + ")"
	}
	return s.ID
}

// outcome says how a step ended: its status, and its duration or why it
// did not succeed.
func outcome(s *orchestrate.StepRecord, dur time.Duration) string {
	out := s.Status
	if s.StartedAt != nil {
		out += " in " + elapsed(dur)
	}
	if f := failure(s); f != "" {
		out += ": " + f
	}
	return out
}

// failure is what went wrong with s, or why it was skipped: its error's
// code and message on one line, or its reason's code; "" if neither.
func failure(s *orchestrate.StepRecord) string {
	switch {
	case s.Error != nil:
		return string(s.Error.Code) + ": " + oneLine(s.Error.Message, 200)
	case s.Reason != nil:
		return string(s.Reason.Code)
	}
	return ""
}

// progressText says what a tool reported.
func progressText(p registry.Progress) string {
	var parts []string
	if p.Total > 0 {
		parts = append(parts, fmt.Sprintf("%g/%g", p.Progress, p.Total))
	} else if p.Message == "" {
		parts = append(parts, fmt.Sprintf("%g", p.Progress))
	}
	if p.Message != "" {
		parts = append(parts, oneLine(p.Message, 80))
	}
	return strings.Join(parts, " ")
}

// elapsed says a duration the way the view shows it: 12ms, 1.5s, 2m03s.
func elapsed(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// oneLine returns s on one line, cut to n characters.
func oneLine(s string, n int) string {
	return textcut.Ellipsis(strings.Join(strings.Fields(s), " "), n)
}

// plural says n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
