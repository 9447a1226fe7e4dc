// Package store keeps durable records of orchestrations: one row per run,
// written when the run starts, one per step, written as each step ends, and
// the result envelope when the run finishes. Records live in a SQLite
// database (the pure-Go modernc.org/sqlite driver, WAL mode) at
// [DefaultPath] unless told otherwise; the path [Memory] keeps nothing on
// disk.
//
// One writer goroutine per [Store] applies the writes, all those pending in
// one transaction (group commit). The Queue methods return as soon as a
// write is queued and log its errors; the others wait for the commit and
// return them. Reads wait for the writes queued before them, and Close for
// all that were queued, so nothing queued is lost while the process lives.
//
// A run left "running" by a process that ended without finishing it — a
// crash, a SIGKILL — is marked "interrupted" the next time a store opens the
// database. Old runs are deleted according to a [Retention] policy, and the
// schema is migrated by numbered, embedded SQL files.
//
// A store whose path is a postgres:// URL (see [IsPostgres]) keeps the
// same records in PostgreSQL, through pgx, with the same SQL and twin
// migrations (migrations/postgres), so that several replicas share them.
// There, crash recovery is by lease: a replica renews the lease of the runs
// it executes, and another marks a run interrupted only once its lease
// lapsed ([Options.Lease]).
//
// A run has an owner, who started it (an HTTP client's credential, or ""
// for the machine's own callers). Reads within an owner's [Scope] see only
// that owner's runs, within a [TenantScope] only that tenant's; the zero
// Scope sees every run.
//
//	s, err := store.Open(ctx, store.Memory, store.Options{Retention: store.Retention{MaxRuns: 1000}})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//
//	err = s.StartRun(ctx, store.Run{ExecID: "e1", Tool: "agent_orchestrate", Plan: plan})
//	err = s.RecordStep(ctx, store.StepRecord{ExecID: "e1", StepID: "research", Status: "success", Output: out})
//	err = s.FinishRun(ctx, "e1", store.StatusSuccess, envelope, time.Now(), 0)
//
//	// Off the caller's path: queued, committed in the background.
//	err = s.QueueStartRun(ctx, store.Run{ExecID: "e2", Tool: "agent_orchestrate"})
//	err = s.QueueFinishRun(ctx, "e2", store.StatusSuccess, envelope, time.Time{}, 0)
//
//	run, steps, err := s.Get(ctx, "e1") // waits for the writes queued before it
//	page, next, err := s.List(ctx, store.ListOptions{Limit: 20})
//	mine, next, err := s.List(ctx, store.ListOptions{Scope: store.OwnerScope("token:3f9a…")})
//
// A viewer reads a run in outline (its steps without their arguments and
// outputs), one step whole, and lists runs by text and time:
//
//	run, outline, err := s.OutlineIn(ctx, scope, "e1")
//	step, err := s.StepIn(ctx, scope, "e1", "research")
//	page, next, err := s.List(ctx, store.ListOptions{Scope: scope, Roots: true, Text: "report", Since: yesterday})
package store
