package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Background runs across replicas. A background run is marked as such
// (MarkBackground) once it was accepted; its request is the one
// QueueKeepRequest stored for resuming it. On PostgreSQL the replica that
// runs it holds its lease like any run's. When that replica dies, the
// lease lapses, a surviving replica marks the run interrupted, and
// TakeOrphans hands it to exactly one replica, which resumes it (finished
// steps are not run again). A cancel asked on another replica than the
// one running the run is a flag (RequestCancel) that the running replica
// reads with Cancels after each lease renewal. SQLite stores have one
// replica: their background runs never leave the process that started
// them, and TakeOrphans finds none.

// MaxTakeovers is how often a background run is taken up after the
// replica running it died: a run that kills every replica that runs it
// stays interrupted after that.
const MaxTakeovers = 3

// Orphan is a background run taken up by this store's replica.
// It carries the ids the run was started with, for the run it goes on as.
type Orphan struct {
	ExecID    string
	RequestID string
	UserID    string
	Owner     string
	Tenant    string
}

// MarkBackground marks run execID a background run, and waits until
// that, and the writes queued before it (the run's start and request), is
// committed: once its caller is answered, the run is one any replica can
// take up.
func (s *Store) MarkBackground(ctx context.Context, execID string) error {
	if execID == "" {
		return fmt.Errorf("marking a background run: exec id is required")
	}
	return s.do(ctx, &backgroundWrite{db: s.writer, id: execID, at: s.now()})
}

// Postgres reports whether the store is on PostgreSQL, where replicas
// share it.
func (s *Store) Postgres() bool { return s.pg }

// OnSweep sets f, which a PostgreSQL store's lease loop calls after each
// renewal of its leases and sweep of the lapsed ones (every Lease/3),
// with a context that ends before the next: where the replica takes
// orphans up and sees the cancels asked elsewhere. A later call replaces
// f; nil removes it.
func (s *Store) OnSweep(f func(ctx context.Context)) {
	if f == nil {
		s.sweep.Store(nil)
		return
	}
	s.sweep.Store(&f)
}

// TakeOrphans takes up to n background runs whose replica died for this
// one: interrupted, not paused, not cancelled, kept a request, taken over
// fewer than MaxTakeovers times, and not taken by another replica within
// its lease. Each row is taken by one replica only (FOR UPDATE SKIP
// LOCKED, and a takeover lease the statement itself checks). The caller
// then resumes each; a resume that finds the run claimed by someone else
// leaves it to them. SQLite stores return none.
func (s *Store) TakeOrphans(ctx context.Context, n int) ([]Orphan, error) {
	if !s.pg || n <= 0 {
		return nil, nil
	}
	now := s.now()
	rows, err := s.reader.QueryContext(ctx, `WITH next AS (
			SELECT b.exec_id FROM background b
			JOIN runs r ON r.exec_id = b.exec_id
			JOIN resumable k ON k.exec_id = b.exec_id
			WHERE r.status = 'interrupted' AND k.paused = 0 AND b.cancel_at IS NULL
				AND b.takeovers < ? AND coalesce(b.taken_until, 0) < ?
			ORDER BY coalesce(b.taken_until, 0), b.queued_at
			LIMIT ?
			FOR UPDATE OF b SKIP LOCKED)
		UPDATE background SET takeovers = background.takeovers + 1, taken_until = ?
		FROM next, runs
		WHERE background.exec_id = next.exec_id AND runs.exec_id = next.exec_id
		RETURNING background.exec_id, runs.request_id, runs.user_id, runs.owner, runs.tenant`,
		MaxTakeovers, now.UnixNano(), n, now.Add(s.lease).UnixNano())
	if err != nil {
		return nil, fmt.Errorf("taking up background runs whose replica died: %w", err)
	}
	defer rows.Close()
	var out []Orphan
	for rows.Next() {
		var o Orphan
		if err := rows.Scan(&o.ExecID, &o.RequestID, &o.UserID, &o.Owner, &o.Tenant); err != nil {
			return nil, fmt.Errorf("taking up background runs whose replica died: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("taking up background runs whose replica died: %w", err)
	}
	return out, nil
}

// QueueEndBackground queues the end of background run execID: it is no
// longer one to take up or cancel.
func (s *Store) QueueEndBackground(ctx context.Context, execID string) error {
	return s.q.push(ctx, &backgroundWrite{db: s.writer, id: execID, end: true}, nil)
}

// RequestCancel asks that background run execID, which scope must see,
// be cancelled by the replica running it, and reports whether it is a
// background run that is still running (only then is the flag set). The
// flag is for other replicas: on SQLite, where the process that started a
// run is the only one running it, RequestCancel sets nothing.
func (s *Store) RequestCancel(ctx context.Context, scope Scope, execID string) (bool, error) {
	if !s.pg {
		return false, nil
	}
	if err := s.Flush(ctx); err != nil {
		return false, fmt.Errorf("cancelling run %s: %w", execID, err)
	}
	where, args := scope.where()
	cond := ""
	for _, w := range where {
		cond += " AND " + w
	}
	res, err := s.reader.ExecContext(ctx, `UPDATE background SET cancel_at = coalesce(cancel_at, ?)
		WHERE exec_id = ? AND exec_id IN (SELECT exec_id FROM runs WHERE exec_id = ? AND status = 'running'`+cond+`)`,
		append([]any{s.now().UnixNano(), execID, execID}, args...)...)
	if err != nil {
		return false, fmt.Errorf("cancelling run %s: %w", execID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("cancelling run %s: %w", execID, err)
	}
	return n > 0, nil
}

// Cancels returns the background runs this store's replica runs that
// another replica was asked to cancel.
func (s *Store) Cancels(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT b.exec_id FROM background b JOIN runs r ON r.exec_id = b.exec_id
		WHERE b.cancel_at IS NOT NULL AND r.status = 'running' AND r.instance = ?`, s.instance)
	if err != nil {
		return nil, fmt.Errorf("reading the cancels asked of this replica's runs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading the cancels asked of this replica's runs: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// runSweep calls the OnSweep function, if any.
func (s *Store) runSweep(ctx context.Context) {
	if f := s.sweep.Load(); f != nil {
		(*f)(ctx)
	}
}

// backgroundWrite marks a run a background run, or ends that.
type backgroundWrite struct {
	db  *sql.DB
	id  string
	at  time.Time
	end bool
}

func (w *backgroundWrite) String() string {
	if w.end {
		return "ending background run " + w.id
	}
	return "marking run " + w.id + " a background run"
}
func (w *backgroundWrite) execID() string { return w.id }
func (w *backgroundWrite) encode() error  { return nil }

func (w *backgroundWrite) apply(ctx context.Context, tx *sql.Tx, _ *statements) error {
	return inTx(ctx, w.db, tx, func(tx *sql.Tx) error {
		var err error
		if w.end {
			_, err = tx.ExecContext(ctx, `DELETE FROM background WHERE exec_id = ?`, w.id)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO background (exec_id, queued_at) VALUES (?, ?) ON CONFLICT (exec_id) DO NOTHING`, w.id, w.at.UnixNano())
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		return nil
	})
}
