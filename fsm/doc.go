// Package fsm is the state machine of one orchestration, built on
// github.com/looplab/fsm.
//
// The engine (package orchestrate) drives it from a plain loop: it fires an
// event whenever something happens (the plan validated, a step ended, a
// group finished, the deadline passed, a tool panicked) and the machine
// moves between the states of the design, or refuses an event its state
// does not allow. The machine is the authority for the run's state; the
// engine is its only user, and reports runs to the rest of orchestra
// through orchestrate.Hooks.
//
//	m := fsm.New()
//	_ = m.Fire(ctx, fsm.EventValidated, nil)
//	m.Current() // plan_validated
package fsm
