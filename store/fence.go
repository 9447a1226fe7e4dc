package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Fencing. On PostgreSQL a replica that stalled past its lease — paused,
// cut off from the database, its renewals late — may wake to find its runs
// taken over: marked interrupted by another replica, perhaps resumed and
// finished there. Its late writes must not overwrite those records, so
// the writes of a run's steps, its pause and its end carry the writer's
// instance and apply only while the run is still that instance's and not
// interrupted (checked in the statement itself, which locks the run's row
// against a concurrent takeover). A refused write fails with [ErrFenced],
// is logged with the run's exec id, and is counted in [Stats].Fenced.
// SQLite stores are not fenced: one machine's processes see a dead
// instance by its lock file, never a live one as dead.
//
// The fence is the instance, so it cannot tell a stalled execution of a
// run from a later one in the same process: a store therefore refuses to
// resume a run it is still executing ([ErrStillExecuting]) until that
// execution has written its end or its pause (fenced or not).

// ErrFenced means a write was refused because the run is no longer this
// store's: its lease lapsed and another replica interrupted or resumed it.
var ErrFenced = errors.New("the run was taken over by another replica after this one's lease lapsed")

// ErrStillExecuting means a resume was refused because this store is
// still executing the run: it stalled past its lease, and another replica
// interrupted the run meanwhile.
var ErrStillExecuting = errors.New("the run is still executing on this replica, which stalled past its lease: resume it once that execution ends, or on another replica")

const (
	// pgUpsertStepSQL is upsertStepSQL, fenced: its last two parameters are
	// the exec id again and the writer's instance. PostgreSQL infers no
	// types for a SELECT list's parameters, hence the casts.
	pgUpsertStepSQL = `INSERT INTO steps
		(exec_id, step_id, idx, path, tool, status, started_at, duration_ms, attempts, output, error, kind, arguments, step_exec_id)
		SELECT ?::text, ?::text, ?::bigint, ?::text, ?::text, ?::text, ?::bigint, ?::bigint, ?::bigint, ?::text, ?::text, ?::text, ?::text, ?::text
		WHERE EXISTS (` + pgFenceSQL + `)
		ON CONFLICT (exec_id, step_id) DO UPDATE SET
			idx = excluded.idx, path = excluded.path, tool = excluded.tool, status = excluded.status,
			started_at = excluded.started_at, duration_ms = excluded.duration_ms,
			attempts = excluded.attempts, output = excluded.output, error = excluded.error,
			kind = excluded.kind, arguments = excluded.arguments, step_exec_id = excluded.step_exec_id`
	// pgFencedFinishRunSQL is pgFinishRunSQL, fenced: its last parameter is
	// the writer's instance.
	pgFencedFinishRunSQL = pgFinishRunSQL + ` AND instance = ? AND status <> 'interrupted'`
	// pgFenceSQL finds run ? while instance ? holds it, and keeps another
	// replica from taking it until the write commits.
	pgFenceSQL   = `SELECT 1 FROM runs WHERE exec_id = ? AND instance = ? AND status <> 'interrupted' FOR SHARE`
	runExistsSQL = `SELECT count(*) FROM runs WHERE exec_id = ?`
)

// fenceID is the instance a write of this store is fenced with: "" (no
// fence) on SQLite.
func (s *Store) fenceID() string {
	if !s.pg {
		return ""
	}
	return s.instance
}

// refusedWrite tells why a fenced write of run id changed nothing:
// [ErrFenced] when the run exists, [ErrNotFound] otherwise. count runs
// runExistsSQL.
func refusedWrite(w write, id string, count func() *sql.Row) error {
	var n int
	if err := count().Scan(&n); err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", w, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", w, ErrFenced)
}

// checkFence fails with [ErrFenced] unless instance fence holds run id
// (and locks its row until tx ends); fence "" checks nothing.
func checkFence(ctx context.Context, tx *sql.Tx, w write, id, fence string) error {
	if fence == "" {
		return nil
	}
	var one int
	err := tx.QueryRowContext(ctx, pgFenceSQL, id, fence).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return refusedWrite(w, id, func() *sql.Row { return tx.QueryRowContext(ctx, runExistsSQL, id) })
	}
	if err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	return nil
}

// executing is the set of runs a PostgreSQL store's process is executing:
// started or resumed here, and neither finished nor paused since.
type executing struct {
	mu  sync.Mutex
	ids map[string]bool
}

// add adds id, and reports false when it was there already.
func (e *executing) add(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids[id] {
		return false
	}
	if e.ids == nil {
		e.ids = map[string]bool{}
	}
	e.ids[id] = true
	return true
}

func (e *executing) remove(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.ids, id)
}
