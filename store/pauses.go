package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// Runs that can go on. A run keeps its request (KeepRequest) so that it can
// be resumed after it was interrupted or failed; a run that waits for its
// client to run client-final tools is paused (Pause) until a resume claims
// it (Claim). A paused run stays "running" in the runs table, where crash
// recovery leaves it alone: it survives the process. Its history of pauses
// and resumes is read with Pauses.

// StatusPaused is the status Get and List report for a run that waits for
// its client. It is never written: a paused run is running, and paused.
const StatusPaused Status = "paused"

// ErrClaimed means another resume took the run since it was read.
var ErrClaimed = errors.New("execution was resumed by another request")

// Resumable is what continuing a run needs.
type Resumable struct {
	Run *Run
	// Request is the run's request as KeepRequest or Pause stored it.
	Request json.RawMessage
	// Paused reports that the run waits for its client, for Pending,
	// until ExpiresAt.
	Paused    bool
	Pending   json.RawMessage
	ExpiresAt time.Time
	// Loops are the paused tool loops of its steps, as Pause stored them.
	Loops json.RawMessage
	// Claims counts how often the run was taken up again.
	Claims int
	// Steps are the run's step records.
	Steps []StepRecord
}

// PauseEvent is one entry of a run's history of pauses and resumes.
type PauseEvent struct {
	Seq    int
	Event  string // paused, resumed or expired
	At     time.Time
	Detail json.RawMessage
}

// QueueKeepRequest queues the request of run execID, which a resume of the
// run reads, and returns without waiting for it.
func (s *Store) QueueKeepRequest(ctx context.Context, execID string, request json.RawMessage) error {
	if execID == "" || len(request) == 0 {
		return fmt.Errorf("keeping the request of run %q: exec id and request are required", execID)
	}
	return s.q.push(ctx, &keepWrite{db: s.writer, id: execID, request: request}, nil)
}

// Pause records that run execID waits for its client's results of pending
// until expires, with its request and the state of its steps' paused tool
// loops (loops, which may be empty), and waits until that, and every write
// queued before it, is committed.
func (s *Store) Pause(ctx context.Context, execID string, request, pending, loops json.RawMessage, expires time.Time) error {
	w := &pauseWrite{db: s.writer, id: execID, request: request, pending: pending, loops: loops, expires: expires, at: s.now(), fence: s.fenceID()}
	s.running.remove(execID)
	return s.do(ctx, w)
}

// Claim takes run execID up again for one resume ("resumed") or to end
// an expired pause ("expired"): it succeeds only when the run's claims
// still number claims, and fails with [ErrClaimed] otherwise. A claimed
// run is running again, stamped with this store's instance, and no longer
// paused; detail is kept in its history.
func (s *Store) Claim(ctx context.Context, execID string, claims int, event string, detail json.RawMessage) error {
	if event != "resumed" && event != "expired" {
		return fmt.Errorf("claiming run %s: unknown event %q", execID, event)
	}
	w := &claimWrite{db: s.writer, id: execID, claims: claims, event: event, detail: detail, at: s.now(), instance: s.instance, lease: s.leaseUntil()}
	if !s.pg {
		return s.do(ctx, w)
	}
	if !s.running.add(execID) {
		return fmt.Errorf("%s: %w", w, ErrStillExecuting)
	}
	err := s.do(ctx, w)
	if err != nil {
		s.running.remove(execID)
	}
	return err
}

// ResumableIn returns what continuing run execID needs, within scope: the
// run, its request, its pause and its steps. A run the scope does not see,
// or that kept no request, is [ErrNotFound].
func (s *Store) ResumableIn(ctx context.Context, scope Scope, execID string) (*Resumable, error) {
	run, steps, err := s.GetIn(ctx, scope, execID)
	if err != nil {
		return nil, err
	}
	res := &Resumable{Run: run, Steps: steps}
	var request, pending, loops sql.NullString
	var expires sql.NullInt64
	var paused int
	err = s.reader.QueryRowContext(ctx, `SELECT request, paused, pending, expires_at, claims, loops FROM resumable WHERE exec_id = ?`, execID).
		Scan(&request, &paused, &pending, &expires, &res.Claims, &loops)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("reading run %s: it kept no request to resume with: %w", execID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", execID, err)
	}
	res.Request, res.Pending, res.Paused, res.ExpiresAt, res.Loops = rawJSON(request), rawJSON(pending), paused == 1, fromNull(expires), rawJSON(loops)
	return res, nil
}

// Pauses returns the history of run execID's pauses and resumes, oldest
// first.
func (s *Store) Pauses(ctx context.Context, execID string) ([]PauseEvent, error) {
	if err := s.Flush(ctx); err != nil {
		return nil, fmt.Errorf("reading the pauses of run %s: %w", execID, err)
	}
	return readPauses(ctx, s.reader, execID)
}

// PausesIn is Pauses within scope: a run the scope does not see is
// [ErrNotFound].
func (s *Store) PausesIn(ctx context.Context, scope Scope, execID string) ([]PauseEvent, error) {
	var out []PauseEvent
	err := s.readRun(ctx, scope, execID, false, func(tx *sql.Tx, _ *Run) (err error) {
		out, err = readPauses(ctx, tx, execID)
		return err
	})
	return out, err
}

func readPauses(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, execID string) ([]PauseEvent, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, event, at, detail FROM pauses WHERE exec_id = ? ORDER BY seq`, execID)
	if err != nil {
		return nil, fmt.Errorf("reading the pauses of run %s: %w", execID, err)
	}
	defer rows.Close()
	var out []PauseEvent
	for rows.Next() {
		var ev PauseEvent
		var at int64
		var detail sql.NullString
		if err := rows.Scan(&ev.Seq, &ev.Event, &at, &detail); err != nil {
			return nil, fmt.Errorf("reading the pauses of run %s: %w", execID, err)
		}
		ev.At, ev.Detail = time.Unix(0, at).UTC(), rawJSON(detail)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// inTx runs f in tx, or in a transaction of its own when tx is nil.
func inTx(ctx context.Context, db *sql.DB, tx *sql.Tx, f func(*sql.Tx) error) error {
	if tx != nil {
		return f(tx)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// addPauseEvent appends an event to a run's history.
func addPauseEvent(ctx context.Context, tx *sql.Tx, id, event string, at time.Time, detail sql.NullString) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO pauses (exec_id, seq, event, at, detail)
		VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM pauses WHERE exec_id = ?), ?, ?, ?)`,
		id, id, event, at.UnixNano(), detail)
	return err
}

// keepWrite stores a run's request.
type keepWrite struct {
	db      *sql.DB
	id      string
	request json.RawMessage
	text    sql.NullString
}

func (w *keepWrite) String() string { return "keeping the request of run " + w.id }
func (w *keepWrite) execID() string { return w.id }
func (w *keepWrite) encode() (err error) {
	if w.text, err = jsonText(w.request); err != nil {
		return fmt.Errorf("%s: %w", w, err)
	}
	return nil
}

func (w *keepWrite) apply(ctx context.Context, tx *sql.Tx, _ *statements) error {
	return inTx(ctx, w.db, tx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO resumable (exec_id, request) VALUES (?, ?)
			ON CONFLICT (exec_id) DO UPDATE SET request = excluded.request`, w.id, w.text)
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		return nil
	})
}

// pauseWrite pauses a run.
type pauseWrite struct {
	db                              *sql.DB
	id                              string
	request, pending, loops         json.RawMessage
	requestText, pendText, loopText sql.NullString
	expires, at                     time.Time
	fence                           string // the instance that must hold the run, on PostgreSQL
}

func (w *pauseWrite) String() string { return "pausing run " + w.id }
func (w *pauseWrite) execID() string { return w.id }
func (w *pauseWrite) encode() (err error) {
	if w.requestText, err = jsonText(w.request); err != nil || !w.requestText.Valid {
		return fmt.Errorf("%s: request: %w", w, errors.Join(err, errors.New("a paused run needs its request")))
	}
	if w.pendText, err = jsonText(w.pending); err != nil {
		return fmt.Errorf("%s: pending: %w", w, err)
	}
	if w.loopText, err = jsonText(w.loops); err != nil {
		return fmt.Errorf("%s: loops: %w", w, err)
	}
	return nil
}

func (w *pauseWrite) apply(ctx context.Context, tx *sql.Tx, _ *statements) error {
	return inTx(ctx, w.db, tx, func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, w, w.id, w.fence); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO resumable (exec_id, request, paused, pending, expires_at, loops) VALUES (?, ?, 1, ?, ?, ?)
			ON CONFLICT (exec_id) DO UPDATE SET request = excluded.request, paused = 1, pending = excluded.pending, expires_at = excluded.expires_at, loops = excluded.loops`,
			w.id, w.requestText, w.pendText, w.expires.UnixNano(), w.loopText)
		if err == nil {
			err = addPauseEvent(ctx, tx, w.id, "paused", w.at, w.pendText)
		}
		if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
			return fmt.Errorf("%s: %w", w, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		return nil
	})
}

// claimWrite takes a run up again.
type claimWrite struct {
	db         *sql.DB
	id         string
	claims     int
	event      string
	detail     json.RawMessage
	detailText sql.NullString
	at         time.Time
	instance   string
	lease      sql.NullInt64 // on PostgreSQL: the claimed run's lease, so no replica takes it for lapsed
}

func (w *claimWrite) String() string { return "resuming run " + w.id }
func (w *claimWrite) execID() string { return w.id }
func (w *claimWrite) encode() (err error) {
	if w.detailText, err = jsonText(w.detail); err != nil {
		return fmt.Errorf("%s: detail: %w", w, err)
	}
	return nil
}

func (w *claimWrite) apply(ctx context.Context, tx *sql.Tx, _ *statements) error {
	return inTx(ctx, w.db, tx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE resumable SET paused = 0, pending = NULL, expires_at = NULL, loops = NULL, claims = claims + 1
			WHERE exec_id = ? AND claims = ?`, w.id, w.claims)
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w", w, ErrClaimed)
		}
		// Running again, here: crash recovery finds it under this
		// instance, and its end is written by this process.
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'running', instance = ?, lease_until = ?, finished_at = NULL, error = '', envelope = NULL
			WHERE exec_id = ?`, w.instance, w.lease, w.id); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		if err := addPauseEvent(ctx, tx, w.id, w.event, w.at, w.detailText); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		return nil
	})
}

// resumeColumn tells, with each run read, whether it can go on: -1 when it
// kept no request, 1 while it is paused, 0 otherwise.
const resumeColumn = `coalesce((SELECT paused FROM resumable WHERE resumable.exec_id = runs.exec_id), -1)`

// resumeState sets the status and Resumable of a run read with
// resumeColumn's value v.
func (r *Run) resumeState(v int) {
	switch {
	case v == 1 && r.Status == StatusRunning:
		r.Status, r.Resumable = StatusPaused, true
	case v == 0 && (r.Status == StatusInterrupted || r.Status == StatusFailed || r.Status == StatusCancelled):
		r.Resumable = true
	}
}
