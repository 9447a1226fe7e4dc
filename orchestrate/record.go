package orchestrate

import (
	"fmt"
	"time"

	"github.com/orchestra-mcp/orchestra/fsm"
)

// A step's record goes from pending to running when the step starts, then
// to its final status when it ends (ended is then set, and it is never
// written again). Records are guarded by run.mu; the hooks get copies.

// buildRecords makes the record of every step, pending.
func (r *run) buildRecords() {
	all := r.plan.All()
	if len(r.records) == 0 {
		r.records = make(map[*Step]*StepRecord, len(all))
		r.outputs = make(map[*Step]any, len(all))
	}
	for _, s := range r.plan.Steps {
		r.buildRecord(s)
	}
}

// buildRecord makes the pending record of s and of the steps in it. A
// loop's iterations get theirs when its array resolves (loop.go).
func (r *run) buildRecord(s *Step) *StepRecord {
	rec := &StepRecord{ID: s.ID, Index: s.index, Path: s.path, Tool: s.Tool, ResultKey: s.ResultKey, Status: StatusPending, step: s}
	switch {
	case s.IsGroup():
		rec.Type, rec.Merge = "parallel", s.Merge
		rec.Children = make([]*StepRecord, 0, len(s.Parallel))
		for _, c := range s.Parallel {
			rec.Children = append(rec.Children, r.buildRecord(c))
		}
	case s.IsLoop():
		rec.Type, rec.Merge = TypeForEach, s.Merge
	default:
		rec.Type = "tool"
	}
	r.records[s] = rec
	return rec
}

// copyRecord copies the record of s for the hooks, without its children;
// r.mu is held.
func copyRecord(rec *StepRecord) *StepRecord {
	cp := *rec
	cp.Children = nil
	return &cp
}

// record returns a copy of the record of s.
func (r *run) record(s *Step) *StepRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return copyRecord(r.records[s])
}

// startStep marks s running and tells the hooks.
func (r *run) startStep(s *Step) {
	now := time.Now()
	id := r.e.opts.NewID()
	r.mu.Lock()
	rec := r.records[s]
	rec.Status = StatusRunning
	rec.StartedAt = &now
	rec.ExecID = id
	var cp *StepRecord
	if r.hooks.StepStarted != nil {
		cp = copyRecord(rec)
	}
	r.mu.Unlock()
	r.fire(fsm.EventStepStarted)
	if cp != nil {
		callHook(r, "StepStarted", r.hooks.StepStarted, StepStartedInfo{Run: r.info, At: now, Step: cp})
	}
}

// end sets the final status of s, its output and error; stepEnded then
// reports it.
func (r *run) end(s *Step, status string, out any, err *Error) {
	r.mu.Lock()
	rec := r.records[s]
	rec.Status = status
	rec.Error = err
	if rec.StartedAt != nil {
		rec.DurationMS = time.Since(*rec.StartedAt).Milliseconds()
	}
	if status == StatusSuccess || status == StatusPartial {
		rec.Output = out
		r.outputs[s] = out
	}
	if err != nil && err.StepID == "" {
		err.StepID = s.ID
	}
	r.redactError(err)
	r.mu.Unlock()
}

// stepEnded is the one place where a step ends: event moves the state
// machine (step_finished, or the outcome of a top-level step), then the
// hooks see the final record. A step ends once; ending it again is a bug,
// kept as an internal error.
func (r *run) stepEnded(s *Step, event string) {
	r.mu.Lock()
	rec := r.records[s]
	if rec.ended {
		r.mu.Unlock()
		r.internalError(fmt.Errorf("step %s ended twice", s.path))
		return
	}
	rec.ended = true
	if s.IsLoop() && rec.Children == nil {
		r.info.grow(-leafCount(s.Do)) // it never ran its body
	}
	var cp *StepRecord
	if r.hooks.StepEnded != nil {
		cp = copyRecord(rec)
	}
	r.mu.Unlock()
	r.fire(event)
	if cp != nil {
		callHook(r, "StepEnded", r.hooks.StepEnded, StepEndedInfo{Run: r.info, At: time.Now(), Step: cp})
	}
}

// skip ends s and whatever in it has not ended as skipped, children before
// their group; why, when set, says why s did not run.
func (r *run) skip(s *Step, why *Error) {
	r.mu.Lock()
	ended := r.records[s].ended
	r.mu.Unlock()
	if ended {
		return
	}
	for _, c := range s.Parallel {
		r.skip(c, nil)
	}
	r.mu.Lock()
	rec := r.records[s]
	if rec.Status == StatusPending {
		rec.Status = StatusSkipped
	}
	if why != nil {
		rec.Error = why
	}
	r.mu.Unlock()
	r.stepEnded(s, fsm.EventStepFinished)
}

// endAll ends every step that has not ended: those that never started as
// skipped.
func (r *run) endAll() {
	if r.plan == nil || len(r.records) == 0 {
		return
	}
	for _, s := range r.plan.Steps {
		r.skip(s, nil)
	}
}
