package server

import (
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// The observers of the app — records, logs, progress, client logs —
// agree on when a step starts and ends through these two functions.
// A parallel group ends twice in the state machine (parallel_complete, then
// merged or a failure) and is taken to end at the first.

// stepStarted reports whether ev is the start of a step.
func stepStarted(ev orchestrate.Event) bool {
	return ev.Step != nil && ev.Transition.Event == fsm.EventStepStarted
}

// stepEnded reports whether ev is the end of a step: a tool step that
// succeeded or failed, a group whose children all ended, a step inside a
// group that ended, or a step skipped because a step it needs failed.
func stepEnded(ev orchestrate.Event) bool {
	if ev.Step == nil {
		return false
	}
	switch ev.Transition.Event {
	case fsm.EventStepFinished:
		return true
	case fsm.EventParallelComplete:
		return ev.Step.Type == "parallel"
	case fsm.EventStepSucceeded, fsm.EventStepFailed, fsm.EventStepFailedContinue, fsm.EventPanic:
		return ev.Step.Type != "parallel"
	}
	return false
}
