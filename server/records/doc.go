// Package records turns the engine's hooks into what runs leave in the
// execution store: a [Recorder] writes each run's start, its steps as they
// start and end, and its end with the envelope (committed before the run
// answers); [Pauses] keeps the checkpoints of paused and resumable runs
// (orchestrate.Pauses); [Lessons] distils the lessons of finished runs and
// gives them back to the planner (planner.Lessons), scoped to their owner.
//
//	learned := records.NewLessons(st, logger)
//	engine := orchestrate.NewEngine(orchestrate.Options{
//		Hooks:  orchestrate.ComposeHooks(records.NewRecorder(st, logger).Hooks(), learned.Hooks()),
//		Pauses: records.NewPauses(st, logger),
//	})
package records
