package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// The writer is the one goroutine that applies the queued writes: group
// commit. It lets writes gather for up to Options.CommitDelay (default
// DefaultCommitDelay), unless someone waits for them, then takes every
// write pending and applies them in one transaction, so that many runs, or
// all the writes of one, share one commit, and the commit happens on
// another core than the run's.

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
			if !s.q.await() {
				return
			}
			s.q.linger(s.linger)
			batch, ok := s.q.take()
			if !ok {
				return
			}
			s.applyBatch(ctx, batch)
			s.q.finish(batch)
		}
	}()
}

// applyBatch applies a batch in one transaction, coalesced, and reports
// each write's error to its caller, or logs it. When a write fails, or the
// transaction does, the transaction is rolled back and each write applied
// as queued in one of its own, so that a write that fails loses no other.
func (s *Store) applyBatch(ctx context.Context, batch []queued) {
	errs := make([]error, len(batch))
	ready := make([]int, 0, len(batch))
	for i, q := range batch {
		if errs[i] = q.w.encode(); errs[i] == nil {
			ready = append(ready, i)
		}
	}
	if len(ready) > 0 {
		ws := make([]write, len(ready))
		for j, i := range ready {
			ws[j] = batch[i].w
		}
		err := s.commit(ctx, coalesce(ws))
		if err != nil && len(ready) > 1 {
			for _, i := range ready {
				errs[i] = s.commit(ctx, []write{batch[i].w})
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
		case errors.Is(err, ErrFenced):
			s.fenced.Add(1)
			s.log.Warn("refused a write to a run another replica took over after this one's lease lapsed", "exec_id", q.w.execID(), "write", q.w.String())
			if q.res != nil {
				q.res <- err
			}
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

// coalesce returns the writes to apply for ws, in order, without those a
// later write of the batch makes redundant — under load a batch holds whole
// runs, and this halves their statements: the finish of a run goes into
// the insert of its start, and a step written again (when it starts, then
// when it ends) is written once, as it ended. Only the writes of a run
// started in the same batch are folded, so the final rows are those the
// writes make one by one; if any write fails, the batch is applied again
// unfolded. ws are left as they are.
func coalesce(ws []write) []write {
	type stepKey struct{ execID, stepID string }
	started := map[string]*startRunWrite{} // copies of the starts of the batch, by exec id
	last := map[stepKey]int{}              // where the latest write of a step is in out
	out := make([]write, 0, len(ws))
	for _, w := range ws {
		switch w := w.(type) {
		case *startRunWrite:
			folded := *w
			started[w.r.ExecID] = &folded
			out = append(out, &folded)
			continue
		case *recordStepWrite:
			if _, ok := started[w.st.ExecID]; ok {
				k := stepKey{w.st.ExecID, w.st.StepID}
				if i, ok := last[k]; ok {
					out[i] = nil
				}
				last[k] = len(out)
			}
		case *finishRunWrite:
			if st, ok := started[w.id]; ok && st.finish == nil {
				st.finish = w
				continue
			}
		}
		out = append(out, w)
	}
	return slices.DeleteFunc(out, func(w write) bool { return w == nil })
}

// commit applies ws and commits them, in one transaction; a single write
// is a single statement, which SQLite commits on its own, sparing the
// round trips of BEGIN and COMMIT.
func (s *Store) commit(ctx context.Context, ws []write) error {
	if len(ws) == 1 {
		if err := ws[0].apply(ctx, nil, s.stmts); err != nil {
			return err
		}
		s.commits.Add(1)
		return nil
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning a write transaction: %w", err)
	}
	for _, w := range ws {
		if err := w.apply(ctx, tx, s.stmts); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing execution records: %w", err)
	}
	s.commits.Add(1)
	return nil
}
