package orchestrate

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/orchestra-mcp/orchestra/registry"
)

// Hooks are the lifecycle callbacks of runs: the one way to observe what
// the engine does. Like net/http/httptrace.ClientTrace, every field is
// optional and [ComposeHooks] joins the hooks of several consumers
// (execution records, logs, progress notifications, spans and metrics)
// into one.
//
// A run calls them in this order:
//
//   - RunStarted, first;
//   - PlanReady, once the plan validated (never for a request that was
//     rejected, a planner that failed or a plan that did not validate);
//   - StepStarted, StepProgress and StepEnded for its steps and groups;
//   - RunPaused and RunResumed around a pause, for runs that wait for a
//     client to run a tool (client-final tools): a run that never pauses
//     never calls them;
//   - RunFinished, last, with the envelope.
//
// A run that pauses is told in parts: the part that pauses ends with
// RunPaused instead of RunFinished (its steps that wait for the client,
// and those after them, have not ended), and the part a resume starts
// begins with RunResumed instead of RunStarted; the steps that ended
// before are not reported again. RunStarted and RunFinished are each
// called once in the run's life.
//
// Every step and every group ends exactly once, with its final record,
// before RunFinished: steps that ran, steps a halt or a timeout kept from
// starting, steps skipped because a step they need failed, the steps of a
// plan that did not validate or of a dry run, at every nesting depth, and
// each iteration of a loop (a step with its index, under the loop). A
// group or loop ends after its children; a step that started ends after it
// started. Nothing about a run is reported after RunFinished.
//
// Hooks are called on the run's goroutines, concurrently for the steps of
// a parallel group or a dag: they must be safe for concurrent use, must not
// block for long, and must not modify what they are given. A hook that
// panics is recovered; the panic is reported in RunFinishedInfo.Err.
type Hooks struct {
	// RunStarted is called when a run starts, before the planner runs on
	// the prompt path and before validation.
	RunStarted func(RunStartedInfo)
	// PlanReady is called when the plan passed validation and its steps
	// are about to be dispatched.
	PlanReady func(PlanReadyInfo)
	// StepStarted is called when a tool step or a group starts.
	StepStarted func(StepStartedInfo)
	// StepProgress is called when a step's tool reports progress.
	StepProgress func(StepProgressInfo)
	// StepEnded is called once for every step and group of the plan, with
	// its final record.
	StepEnded func(StepEndedInfo)
	// RunPaused is called when a run stops to wait for a client to run a
	// client-final tool and send its result back.
	RunPaused func(RunPausedInfo)
	// RunResumed is called when a paused run goes on with the client's
	// results.
	RunResumed func(RunResumedInfo)
	// RunFinished is called last, with the run's envelope.
	RunFinished func(RunFinishedInfo)
}

// RunStartedInfo is the argument of Hooks.RunStarted.
type RunStartedInfo struct {
	Run *RunInfo
	At  time.Time
	// Planning is set on the prompt path: a planner makes the plan first.
	Planning bool
}

// PlanReadyInfo is the argument of Hooks.PlanReady.
type PlanReadyInfo struct {
	Run *RunInfo // Run.Plan and Run.Leaves are set from here on
	At  time.Time
	// Plan is the validated plan, as it will run.
	Plan *Plan
	// Warnings are what validation could not check.
	Warnings []*Issue
	// Planner is the planner's account on the prompt path; nil otherwise.
	Planner *PlannerInfo
}

// StepStartedInfo is the argument of Hooks.StepStarted.
type StepStartedInfo struct {
	Run *RunInfo
	At  time.Time
	// Step is a copy of the step's record as it starts; Children is nil.
	Step *StepRecord
}

// StepProgressInfo is the argument of Hooks.StepProgress.
type StepProgressInfo struct {
	Run *RunInfo
	At  time.Time
	// Step is a copy of the step's record; Children is nil.
	Step *StepRecord
	// Progress is what the tool reported.
	Progress registry.Progress
}

// StepEndedInfo is the argument of Hooks.StepEnded.
type StepEndedInfo struct {
	Run *RunInfo
	At  time.Time
	// Step is a copy of the step's final record; Children is nil (each
	// child ends on its own, before its group). A step that never started
	// has a nil StartedAt.
	Step *StepRecord
}

// RunPausedInfo is the argument of Hooks.RunPaused.
type RunPausedInfo struct {
	Run *RunInfo
	At  time.Time
	// Envelope is the response that asks the client for the results of
	// the tools it runs.
	Envelope *Envelope
}

// RunResumedInfo is the argument of Hooks.RunResumed.
type RunResumedInfo struct {
	Run *RunInfo
	At  time.Time
}

// RunFinishedInfo is the argument of Hooks.RunFinished.
type RunFinishedInfo struct {
	Run *RunInfo
	At  time.Time
	// Envelope is the run's response.
	Envelope *Envelope
	// Err reports what went wrong inside the engine itself, never in the
	// plan: an event the state machine refused, a hook that panicked. It
	// is nil unless the engine has a bug; tests fail on it.
	Err error
}

// ComposeHooks returns hooks that call each of hs in turn, skipping nil
// ones and nil fields. It returns nil when there is nothing to call.
func ComposeHooks(hs ...*Hooks) *Hooks {
	var out *Hooks
	for _, h := range hs {
		if h == nil {
			continue
		}
		if out == nil {
			c := *h
			out = &c
			continue
		}
		out.RunStarted = join(out.RunStarted, h.RunStarted)
		out.PlanReady = join(out.PlanReady, h.PlanReady)
		out.StepStarted = join(out.StepStarted, h.StepStarted)
		out.StepProgress = join(out.StepProgress, h.StepProgress)
		out.StepEnded = join(out.StepEnded, h.StepEnded)
		out.RunPaused = join(out.RunPaused, h.RunPaused)
		out.RunResumed = join(out.RunResumed, h.RunResumed)
		out.RunFinished = join(out.RunFinished, h.RunFinished)
	}
	return out
}

// join returns a function that calls a, then b.
func join[T any](a, b func(T)) func(T) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(v T) {
		a(v)
		b(v)
	}
}

// noHooks stands for a nil *Hooks, so that the run reads fields without a
// nil check.
var noHooks = &Hooks{}

// callHook calls hook f of run r with v, if f is set. A panic in f is
// recovered and kept as an internal error of the run: an observer's bug
// must not take a run, or the process, down.
func callHook[T any](r *run, name string, f func(T), v T) {
	if f == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.e.log.Error("hook panicked", "exec_id", r.execID, "hook", name, "panic", p, "stack", string(debug.Stack()))
			r.internalError(fmt.Errorf("the %s hook panicked: %v", name, p))
		}
	}()
	f(v)
}
