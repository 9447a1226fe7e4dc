package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// Every write goes through one queue to the store's writer goroutine, which
// commits all the writes pending at once in one transaction. The write
// methods come in two forms:
//
//   - StartRun, RecordStep and FinishRun queue the write and wait until it
//     is committed, and return its error;
//   - QueueStartRun, QueueRecordStep and QueueFinishRun return as soon as
//     the write is queued; the writer logs its error, with the exec id.
//
// Either way writes are applied in the order they were queued, and the
// reads (Get, List, Stats) first wait for every write queued before them,
// so a caller reads what it queued. A full queue makes both forms wait for
// room, until their context is done.

// StartRun records the start of a run and waits until it is committed.
// Status defaults to running and StartedAt to now; ExecID and Tool are
// required, and Plan, when set, must be JSON. An ExecID already recorded is
// [ErrExists]. If ctx is done first, StartRun returns its error, and the
// write may still be applied.
func (s *Store) StartRun(ctx context.Context, r Run) error {
	w, err := s.startRun(r)
	if err != nil {
		return err
	}
	return s.do(ctx, w)
}

// QueueStartRun queues what [Store.StartRun] writes and returns without
// waiting for it. Only a missing ExecID or Tool, an unknown status, a full
// queue whose wait ctx ended, or a closed store ([ErrClosed]) are returned;
// a plan that is not JSON or an ExecID already recorded is logged.
func (s *Store) QueueStartRun(ctx context.Context, r Run) error {
	w, err := s.startRun(r)
	if err != nil {
		return err
	}
	return s.q.push(ctx, w, nil)
}

// RecordStep inserts or replaces the record of one step, identified by
// ExecID and StepID, and waits until it is committed: call it when a step
// starts and again when it ends. The run must exist ([ErrNotFound]
// otherwise); Output and Error, when set, must be JSON.
func (s *Store) RecordStep(ctx context.Context, st StepRecord) error {
	w, err := recordStep(st)
	if err != nil {
		return err
	}
	return s.do(ctx, w)
}

// QueueRecordStep queues what [Store.RecordStep] writes and returns without
// waiting for it; errors are returned and logged as by
// [Store.QueueStartRun]. A step queued after the start of its run, even
// with QueueStartRun, finds the run.
func (s *Store) QueueRecordStep(ctx context.Context, st StepRecord) error {
	w, err := recordStep(st)
	if err != nil {
		return err
	}
	return s.q.push(ctx, w, nil)
}

// FinishRun completes a run with its final status and result envelope and
// sets its duration from StartedAt to finishedAt (now when zero), then waits
// until that is committed. The run's Error is taken from the envelope when
// the status is not success: the first entry of artifact.errors, then
// artifact.validation_errors, as "code: message". stepCount, when not 0,
// is the run's step count, for a run whose steps were not known when it
// started (an agent's loop, which makes its steps as it goes); 0 keeps the
// count it started with. An unknown run is [ErrNotFound].
//
// From time to time the writer also applies the retention policy after a
// run finishes; a failure there is logged, not returned.
func (s *Store) FinishRun(ctx context.Context, execID string, status Status, envelope json.RawMessage, finishedAt time.Time, stepCount int) error {
	w, err := s.finishRun(execID, status, envelope, finishedAt, stepCount)
	if err != nil {
		return err
	}
	return s.do(ctx, w)
}

// QueueFinishRun queues what [Store.FinishRun] writes and returns without
// waiting for it; errors are returned and logged as by
// [Store.QueueStartRun].
func (s *Store) QueueFinishRun(ctx context.Context, execID string, status Status, envelope json.RawMessage, finishedAt time.Time, stepCount int) error {
	w, err := s.finishRun(execID, status, envelope, finishedAt, stepCount)
	if err != nil {
		return err
	}
	return s.q.push(ctx, w, nil)
}

// Flush waits until every write queued before it is applied (committed,
// or failed and logged), or until ctx is done. Reads flush by themselves.
func (s *Store) Flush(ctx context.Context) error {
	if err := s.q.wait(ctx, s.q.queuedSoFar()); err != nil {
		return fmt.Errorf("waiting for queued execution records: %w", err)
	}
	return nil
}

// do queues w and waits for its result.
func (s *Store) do(ctx context.Context, w write) error {
	res := make(chan error, 1)
	if err := s.q.push(ctx, w, res); err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", w, ctx.Err())
	}
}

// write is one record write, applied by the writer goroutine.
type write interface {
	// String says what the write does, to prefix its errors.
	String() string
	// execID is the run written to, for the logs.
	execID() string
	// encode turns the write's JSON bodies into column values and checks
	// them. The writer calls it outside any transaction: a write that
	// fails here never touches the database.
	encode() error
	// apply runs the write, with the writer's prepared statements, in tx,
	// or on its own when tx is nil.
	apply(ctx context.Context, tx *sql.Tx, st *statements) error
}

// bind returns stmt for use in tx, or stmt itself when tx is nil.
func bind(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt) *sql.Stmt {
	if tx == nil {
		return stmt
	}
	return tx.StmtContext(ctx, stmt)
}

// statements are the hot writes, prepared once on the writer's connection
// when the store opens: parsing the SQL again for every step cost more than
// running it.
type statements struct {
	insertRun, upsertStep, finishRun *sql.Stmt
	// fence is the instance the step and finish writes are fenced with
	// on PostgreSQL (see ErrFenced); "" on SQLite. runExists tells a
	// fenced write's run from a missing one.
	fence     string
	runExists *sql.Stmt
}

const (
	insertRunSQL = `INSERT INTO runs
		(exec_id, request_id, tool, status, started_at, finished_at, duration_ms, plan, envelope, step_count, error, instance, owner,
		 user_id, tenant, lease_until, parent_exec_id, goal, first_step, tokens_in, tokens_out)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	upsertStepSQL = `INSERT INTO steps
		(exec_id, step_id, idx, path, tool, status, started_at, duration_ms, attempts, output, error, kind, arguments, step_exec_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (exec_id, step_id) DO UPDATE SET
			idx = excluded.idx, path = excluded.path, tool = excluded.tool, status = excluded.status,
			started_at = excluded.started_at, duration_ms = excluded.duration_ms,
			attempts = excluded.attempts, output = excluded.output, error = excluded.error,
			kind = excluded.kind, arguments = excluded.arguments, step_exec_id = excluded.step_exec_id`
	finishRunSQL = `UPDATE runs SET
		status = ?, envelope = ?, finished_at = ?, error = ?, tokens_in = ?, tokens_out = ?,
		duration_ms = max(0, (? - started_at) / 1000000),
		step_count = CASE WHEN ? > 0 THEN ? ELSE step_count END
		WHERE exec_id = ?`
	// PostgreSQL's max is an aggregate; greatest is its scalar max.
	pgFinishRunSQL = `UPDATE runs SET
		status = ?, envelope = ?, finished_at = ?, error = ?, tokens_in = ?, tokens_out = ?,
		duration_ms = greatest(0, (?::bigint - started_at) / 1000000),
		step_count = CASE WHEN ?::bigint > 0 THEN ?::bigint ELSE step_count END
		WHERE exec_id = ?`
)

// prepareStatements prepares the hot writes; a fence (PostgreSQL's
// instance) makes them PostgreSQL's, fenced.
func prepareStatements(ctx context.Context, db *sql.DB, fence string) (*statements, error) {
	st := statements{fence: fence}
	upsert, finish, exists := upsertStepSQL, finishRunSQL, ""
	if fence != "" {
		upsert, finish, exists = pgUpsertStepSQL, pgFencedFinishRunSQL, runExistsSQL
	}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&st.insertRun, insertRunSQL}, {&st.upsertStep, upsert}, {&st.finishRun, finish}, {&st.runExists, exists}} {
		if p.query == "" {
			continue
		}
		var err error
		if *p.stmt, err = db.PrepareContext(ctx, p.query); err != nil {
			st.close()
			return nil, fmt.Errorf("preparing the record writes: %w", err)
		}
	}
	return &st, nil
}

func (st *statements) close() error {
	var first error
	for _, s := range []*sql.Stmt{st.insertRun, st.upsertStep, st.finishRun, st.runExists} {
		if s == nil {
			continue
		}
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// startRunWrite inserts a run.
type startRunWrite struct {
	r              Run
	instance       string
	leaseUntil     sql.NullInt64
	plan, envelope sql.NullString
	// finish, when set, is the run's end, written with the start: see
	// coalesce.
	finish *finishRunWrite
}

func (s *Store) startRun(r Run) (*startRunWrite, error) {
	if r.ExecID == "" || r.Tool == "" {
		return nil, fmt.Errorf("starting run %q: exec id and tool are required", r.ExecID)
	}
	if r.Status == "" {
		r.Status = StatusRunning
	}
	if !r.Status.valid() {
		return nil, fmt.Errorf("starting run %s: unknown status %q", r.ExecID, r.Status)
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = s.now()
	}
	if s.pg && r.Status == StatusRunning {
		s.running.add(r.ExecID)
	}
	return &startRunWrite{r: r, instance: s.instance, leaseUntil: s.leaseUntil()}, nil
}

func (w *startRunWrite) String() string { return "starting run " + w.r.ExecID }
func (w *startRunWrite) execID() string { return w.r.ExecID }

func (w *startRunWrite) encode() error {
	var err error
	if w.plan, err = jsonText(w.r.Plan); err != nil {
		return fmt.Errorf("%s: plan: %w", w, err)
	}
	if w.envelope, err = jsonText(w.r.Envelope); err != nil {
		return fmt.Errorf("%s: envelope: %w", w, err)
	}
	return nil
}

func (w *startRunWrite) apply(ctx context.Context, tx *sql.Tx, st *statements) error {
	r := w.r
	status, finishedAt, duration, envelope, errText, steps := r.Status, r.FinishedAt, r.DurationMS, w.envelope, r.Error, r.StepCount
	tokensIn, tokensOut := r.TokensIn, r.TokensOut
	if f := w.finish; f != nil {
		// What finishRunSQL would set.
		status, finishedAt, envelope, errText = f.status, f.finishedAt, f.envelope, f.errText
		tokensIn, tokensOut = f.tokensIn, f.tokensOut
		duration = max(0, (f.finishedAt.UnixNano()-r.StartedAt.UnixNano())/int64(time.Millisecond))
		if f.stepCount > 0 {
			steps = f.stepCount
		}
	}
	_, err := bind(ctx, tx, st.insertRun).ExecContext(ctx,
		r.ExecID, r.RequestID, r.Tool, string(status), r.StartedAt.UnixNano(), nullTime(finishedAt),
		duration, w.plan, envelope, steps, errText, w.instance, r.Owner,
		r.UserID, r.Tenant, w.leaseUntil, r.ParentExecID, r.Goal, r.FirstStep, tokensIn, tokensOut)
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE) || isPGConstraint(err, pgUniqueViolation) {
		return fmt.Errorf("%s: %w", w, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	return nil
}

// recordStepWrite inserts or replaces a step.
type recordStepWrite struct {
	st                    StepRecord
	output, stepErr, args sql.NullString
}

func recordStep(st StepRecord) (*recordStepWrite, error) {
	if st.ExecID == "" || st.StepID == "" || st.Status == "" {
		return nil, fmt.Errorf("recording step %q of run %q: exec id, step id and status are required", st.StepID, st.ExecID)
	}
	return &recordStepWrite{st: st}, nil
}

func (w *recordStepWrite) String() string {
	return "recording step " + w.st.StepID + " of run " + w.st.ExecID
}
func (w *recordStepWrite) execID() string { return w.st.ExecID }

func (w *recordStepWrite) encode() error {
	var err error
	if w.output, err = jsonText(w.st.Output); err != nil {
		return fmt.Errorf("%s: output: %w", w, err)
	}
	if w.stepErr, err = jsonText(w.st.Error); err != nil {
		return fmt.Errorf("%s: error: %w", w, err)
	}
	if w.args, err = jsonText(w.st.Arguments); err != nil {
		return fmt.Errorf("%s: arguments: %w", w, err)
	}
	return nil
}

func (w *recordStepWrite) apply(ctx context.Context, tx *sql.Tx, stmts *statements) error {
	st := w.st
	args := []any{st.ExecID, st.StepID, st.Index, st.Path, st.Tool, st.Status, nullTime(st.StartedAt),
		st.DurationMS, st.Attempts, w.output, w.stepErr, st.Kind, w.args, st.StepExecID}
	if stmts.fence != "" {
		args = append(args, st.ExecID, stmts.fence)
	}
	res, err := bind(ctx, tx, stmts.upsertStep).ExecContext(ctx, args...)
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) || isPGConstraint(err, pgForeignKeyViolation) {
		return fmt.Errorf("recording step %s: run %s: %w", st.StepID, st.ExecID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	if stmts.fence != "" {
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		} else if n == 0 {
			return refusedWrite(w, st.ExecID, func() *sql.Row { return bind(ctx, tx, stmts.runExists).QueryRowContext(ctx, st.ExecID) })
		}
	}
	return nil
}

// finishRunWrite completes a run.
type finishRunWrite struct {
	id         string
	status     Status
	raw        json.RawMessage // the envelope
	finishedAt time.Time
	stepCount  int // 0 keeps the run's

	envelope            sql.NullString
	errText             string
	tokensIn, tokensOut int64
}

func (s *Store) finishRun(execID string, status Status, envelope json.RawMessage, finishedAt time.Time, stepCount int) (*finishRunWrite, error) {
	if !status.valid() || status == StatusRunning {
		return nil, fmt.Errorf("finishing run %s: status %q is not a final status", execID, status)
	}
	if finishedAt.IsZero() {
		finishedAt = s.now()
	}
	s.running.remove(execID)
	return &finishRunWrite{id: execID, status: status, raw: envelope, finishedAt: finishedAt, stepCount: stepCount}, nil
}

func (w *finishRunWrite) String() string { return "finishing run " + w.id }
func (w *finishRunWrite) execID() string { return w.id }

func (w *finishRunWrite) encode() error {
	var err error
	if w.envelope, err = jsonText(w.raw); err != nil {
		return fmt.Errorf("%s: envelope: %w", w, err)
	}
	facts := readEnvelope(w.raw, w.status != StatusSuccess)
	w.errText, w.tokensIn, w.tokensOut = facts.err, facts.tokensIn, facts.tokensOut
	return nil
}

func (w *finishRunWrite) apply(ctx context.Context, tx *sql.Tx, st *statements) error {
	at := w.finishedAt.UnixNano()
	args := []any{string(w.status), w.envelope, at, w.errText, w.tokensIn, w.tokensOut, at, w.stepCount, w.stepCount, w.id}
	if st.fence != "" {
		args = append(args, st.fence)
	}
	res, err := bind(ctx, tx, st.finishRun).ExecContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s: %w", w, err)
	} else if n == 0 && st.fence != "" {
		return refusedWrite(w, w.id, func() *sql.Row { return bind(ctx, tx, st.runExists).QueryRowContext(ctx, w.id) })
	} else if n == 0 {
		return fmt.Errorf("%s: %w", w, ErrNotFound)
	}
	return nil
}
