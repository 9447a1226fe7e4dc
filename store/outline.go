package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Reads for a viewer of runs, which draws a run's steps without their
// bodies and opens one step at a time: a run of a thousand steps with
// large outputs is drawn from a few kilobytes.

// RunIn returns run execID with its plan and envelope but not its steps,
// within scope, once the writes queued before it are applied. A run the
// scope does not see is [ErrNotFound].
func (s *Store) RunIn(ctx context.Context, scope Scope, execID string) (*Run, error) {
	var r *Run
	err := s.readRun(ctx, scope, execID, true, func(_ *sql.Tx, run *Run) error {
		r = run
		return nil
	})
	return r, err
}

// OutlineIn returns run execID without its plan and envelope, and its
// steps without their arguments and outputs (their errors kept), ordered
// like GetIn's, within scope. A run the scope does not see is
// [ErrNotFound].
func (s *Store) OutlineIn(ctx context.Context, scope Scope, execID string) (*Run, []StepRecord, error) {
	var r *Run
	var steps []StepRecord
	err := s.readRun(ctx, scope, execID, false, func(tx *sql.Tx, run *Run) (err error) {
		r = run
		steps, err = readSteps(ctx, tx, execID, "", false)
		return err
	})
	return r, steps, err
}

// StepIn returns step stepID of run execID with its arguments and output,
// within scope. A run the scope does not see, or a step the run does not
// have, is [ErrNotFound].
func (s *Store) StepIn(ctx context.Context, scope Scope, execID, stepID string) (*StepRecord, error) {
	var step *StepRecord
	err := s.readRun(ctx, scope, execID, false, func(tx *sql.Tx, _ *Run) error {
		steps, err := readSteps(ctx, tx, execID, stepID, true)
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			return fmt.Errorf("reading step %s of run %s: %w", stepID, execID, ErrNotFound)
		}
		step = &steps[0]
		return nil
	})
	return step, err
}
