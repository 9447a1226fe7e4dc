package orchestrate

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orchestra-mcp/orchestra/fsm"
)

// runNode runs a step or group; it never panics.
func (r *run) runNode(ctx context.Context, s *Step) {
	defer func() {
		if v := recover(); v != nil {
			r.e.log.Error("step panicked", "exec_id", r.execID, "step_id", s.ID, "panic", v, "stack", string(debug.Stack()))
			r.end(s, StatusFailed, nil, &Error{Code: CodePanic, Message: fmt.Sprintf("internal error: %v", v)})
		}
	}()
	switch {
	case s.IsGroup():
		r.runGroup(ctx, s)
	case s.IsLoop():
		r.runLoop(ctx, s)
	default:
		r.runLeaf(ctx, s)
	}
}

// runGroup runs a parallel group's children, at most max_concurrency (and
// max_parallel) at once, and merges their outputs. The children that never
// started end as skipped before the group ends.
func (r *run) runGroup(ctx context.Context, g *Step) {
	limit := r.lim.MaxParallel
	if g.MaxConcurrency > 0 && g.MaxConcurrency < limit {
		limit = g.MaxConcurrency
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var eg errgroup.Group
	eg.SetLimit(limit)
	var settled atomic.Bool // the group's outcome is known: no new child starts
	var winner atomic.Pointer[Step]
	stopped := func() bool { return settled.Load() || gctx.Err() != nil || !r.dispatching() }
	for _, c := range g.Parallel {
		if stopped() {
			break
		}
		if r.endedBefore(c) {
			continue // a resume keeps what ended before
		}
		eg.Go(func() error {
			if stopped() {
				return nil
			}
			if why := r.admit(c); why != nil {
				r.skipFor(c, why)
				return nil
			}
			r.startStep(c)
			r.runNode(gctx, c)
			if r.waits(c) {
				return nil // it waits for the client; it has not ended
			}
			r.mu.Lock()
			rec := r.records[c]
			if g.Merge == MergeFirstSuccess && rec.Status == StatusFailed && rec.Error != nil && rec.Error.Code == CodeCancelled {
				// A child the race cancelled lost it; it did not fail.
				rec.Status = StatusCancelled
			}
			status := rec.Status
			r.mu.Unlock()
			switch g.Merge {
			case MergeFirstSuccess:
				if status == StatusSuccess && winner.CompareAndSwap(nil, c) {
					settled.Store(true)
					cancel()
				}
			case MergeCollect:
				if status != StatusSuccess && status != StatusPartial && c.OnError != OnErrorContinue {
					settled.Store(true)
				}
			}
			r.stepEnded(c, fsm.EventStepFinished)
			return nil
		})
	}
	_ = eg.Wait()
	if r.groupWaits(g, settled.Load() || gctx.Err() != nil || !r.dispatching()) {
		return
	}
	for _, c := range g.Parallel {
		r.skip(c, nil)
	}
	r.merge(g, winner.Load())
}

// merge sets the group's status and output from its children's records,
// following its merge strategy; w is the winner of a first_success race.
func (r *run) merge(g *Step, w *Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	grec := r.records[g]
	grec.Status = StatusSuccess
	if grec.StartedAt != nil {
		grec.DurationMS = time.Since(*grec.StartedAt).Milliseconds()
	}
	failed, partial := 0, false
	var firstErr, haltErr *Error
	for _, c := range g.Parallel {
		crec := r.records[c]
		if crec.Status == StatusPartial {
			partial = true
		}
		if crec.Status != StatusSuccess && crec.Status != StatusPartial && crec.Status != StatusSkipped {
			failed++
			if firstErr == nil && crec.Error != nil {
				firstErr = crec.Error
			}
			if haltErr == nil && crec.Error != nil && c.OnError != OnErrorContinue {
				haltErr = crec.Error
			}
		}
	}
	if haltErr == nil {
		haltErr = firstErr
	}
	switch g.Merge {
	case MergeFirstSuccess:
		if w == nil {
			grec.Status = StatusFailed
			grec.Error = &Error{StepID: g.ID, Code: CodeToolError, Message: "no child of the first_success group succeeded"}
			if firstErr != nil {
				grec.Error.Message += "; first failure: " + firstErr.Message
			}
			return
		}
		grec.Output = r.outputs[w]
	default:
		out := make(map[string]any, len(g.Parallel))
		halting := false
		for _, c := range g.Parallel {
			crec := r.records[c]
			if o, ok := r.outputs[c]; ok {
				out[c.key] = o
			} else if g.Merge == MergeAllSettled {
				out[c.key] = nil
			}
			if crec.Status != StatusSuccess && crec.Status != StatusPartial && crec.Status != StatusSkipped && c.OnError != OnErrorContinue && g.Merge == MergeCollect {
				halting = true
			}
		}
		grec.Output = out
		switch {
		case halting && haltErr != nil:
			grec.Status = StatusFailed
			grec.Error = &Error{StepID: g.ID, Code: haltErr.Code, Message: fmt.Sprintf("child %s failed: %s", haltErr.StepID, haltErr.Message)}
		case halting:
			grec.Status = StatusFailed
			grec.Error = &Error{StepID: g.ID, Code: CodeToolError, Message: "a child failed"}
		case failed > 0 || partial:
			grec.Status = StatusPartial
		}
	}
	if grec.Status == StatusSuccess || grec.Status == StatusPartial {
		r.outputs[g] = grec.Output
	}
}
