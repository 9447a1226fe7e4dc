package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Prune deletes the finished runs the retention policy no longer keeps,
// with their steps, and returns how many runs it deleted, once the writes
// queued before it are applied. Runs still running are never deleted,
// though they count towards Retention.MaxRuns.
func (s *Store) Prune(ctx context.Context) (int, error) {
	if err := s.Flush(ctx); err != nil {
		return 0, fmt.Errorf("pruning execution records: %w", err)
	}
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	n, err := s.prune(ctx)
	if err != nil {
		return n, fmt.Errorf("pruning execution records: %w", err)
	}
	if n > 0 {
		s.log.Debug("pruned execution records", "runs", n)
	}
	return n, nil
}

// prune runs with pruneMu held.
func (s *Store) prune(ctx context.Context) (int, error) {
	now := s.now()
	s.lastPrune = now
	s.finishedSince = 0
	if s.keep.MaxAge <= 0 && s.keep.MaxRuns <= 0 {
		return 0, nil
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var total int64
	if s.keep.MaxAge > 0 {
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE status != 'running' AND started_at < ?`,
			now.Add(-s.keep.MaxAge).UnixNano())
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		total += n
	}
	if s.keep.MaxRuns > 0 {
		n, err := pruneByCount(ctx, tx, s.keep.MaxRuns)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return int(total), nil
}

// pruneByCount deletes the finished runs older, in List's order, than the
// newest keep runs. It finds the first run to go by walking the start-time
// index rather than listing the runs that stay: pruning then costs a walk
// of keep index entries, not a scan of the table, and nothing at all while
// the table cannot hold more than keep runs.
func pruneByCount(ctx context.Context, tx *sql.Tx, keep int) (int64, error) {
	// seq only grows, so there are at most max - min + 1 runs. (Two
	// subqueries, because one max and one min each read one index entry,
	// and the two in one query scan the table.)
	var span sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT max(seq) FROM runs) - (SELECT min(seq) FROM runs) + 1`).Scan(&span); err != nil {
		return 0, err
	}
	if !span.Valid || span.Int64 <= int64(keep) {
		return 0, nil
	}
	var startedAt, seq int64
	err := tx.QueryRowContext(ctx, `SELECT started_at, seq FROM runs ORDER BY started_at DESC, seq DESC LIMIT 1 OFFSET ?`, keep).
		Scan(&startedAt, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // keep runs or fewer
	}
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE status != 'running'
		AND (started_at < ? OR (started_at = ? AND seq <= ?))`, startedAt, startedAt, seq)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// maybePrune, called by the writer after it finished n runs, prunes after
// every pruneEvery finished runs or once pruneInterval has passed since the
// last prune, whichever comes first.
func (s *Store) maybePrune(ctx context.Context, n int) {
	if s.keep.MaxAge <= 0 && s.keep.MaxRuns <= 0 {
		return
	}
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	s.finishedSince += n
	if s.finishedSince < s.pruneEvery && s.now().Sub(s.lastPrune) < s.pruneInterval {
		return
	}
	n, err := s.prune(ctx)
	if err != nil {
		s.log.Warn("pruning execution records", "err", err)
		return
	}
	if n > 0 {
		s.log.Debug("pruned execution records", "runs", n)
	}
}
