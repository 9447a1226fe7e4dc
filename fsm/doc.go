// Package fsm is the state machine of one orchestration, built on
// github.com/looplab/fsm.
//
// The executor drives it from a plain loop: it fires an event whenever
// something happens (the plan validated, a step ended, a group finished, the
// deadline passed, a tool panicked) and the machine moves between the states
// of the design. Observers see every transition; they are the single place
// that feeds logs, traces, progress and records.
//
//	m := fsm.New(func(t fsm.Transition) { log.Println(t.Event, t.From, "->", t.To) })
//	_ = m.Fire(ctx, fsm.EventValidated)
//	m.Current() // plan_validated
package fsm
