package store

import (
	"context"
	"database/sql"
	"fmt"
)

// The writer is the one goroutine that applies the queued writes: group
// commit. It takes every write pending and applies them in one transaction,
// so that under load many runs share one commit, and with one client the
// commit happens on another core than the run's.

// startWriter starts the writer goroutine; Close stops it.
func (s *Store) startWriter() {
	s.writerDone = make(chan struct{})
	go func() {
		defer close(s.writerDone)
		// Writes are never cancelled: a queued write is applied, whatever
		// happened to the caller that queued it. busy_timeout bounds the
		// waits for other processes.
		ctx := context.Background()
		for {
			batch, ok := s.q.take()
			if !ok {
				return
			}
			s.applyBatch(ctx, batch)
			s.q.finish(batch)
		}
	}()
}

// applyBatch applies a batch in one transaction and reports each write's
// error to its caller, or logs it. When a write fails, or the transaction
// does, the transaction is rolled back and each write applied in one of
// its own, so that a write that fails loses no other.
func (s *Store) applyBatch(ctx context.Context, batch []queued) {
	errs := make([]error, len(batch))
	ready := make([]int, 0, len(batch))
	for i, q := range batch {
		if errs[i] = q.w.encode(); errs[i] == nil {
			ready = append(ready, i)
		}
	}
	if len(ready) > 0 {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			for _, i := range ready {
				if err := batch[i].w.apply(ctx, tx, s.stmts); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && len(ready) > 1 {
			for _, i := range ready {
				w := batch[i].w
				errs[i] = s.inTx(ctx, func(tx *sql.Tx) error { return w.apply(ctx, tx, s.stmts) })
			}
		} else if err != nil {
			errs[ready[0]] = err
		}
	}
	s.writes.Add(int64(len(batch)))

	finished := 0
	for i, q := range batch {
		err := errs[i]
		if _, ok := q.w.(*finishRunWrite); ok && err == nil {
			finished++
		}
		switch {
		case q.res != nil:
			q.res <- err
		case err != nil:
			s.log.Warn("writing an execution record", "exec_id", q.w.execID(), "err", err)
		}
	}
	if finished > 0 {
		s.maybePrune(ctx, finished)
	}
}

// inTx runs f in a write transaction and commits it.
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning a write transaction: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing execution records: %w", err)
	}
	s.commits.Add(1)
	return nil
}
