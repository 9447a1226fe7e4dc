package orchestrate

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/semaphore"

	"github.com/orchestra-mcp/orchestra/fsm"
)

// prepare builds the records, the name index, the dependencies of the
// top-level steps and the semaphore that caps the tools running at once.
func (r *run) prepare() {
	r.buildRecords()
	all := r.plan.All()
	r.names = make(map[string]*Step, len(all))
	for _, s := range all {
		if s.explicit {
			r.names[s.ID] = s
		}
		if s.ResultKey != "" {
			r.names[s.ResultKey] = s
		}
	}
	r.deps = make(map[*Step][]*Step, len(r.plan.Steps))
	for _, top := range r.plan.Steps {
		var collect func(s *Step)
		need := func(ref *Ref) {
			if ref.IsBinding() || ref.Var != "" {
				return
			}
			if t := r.lookupRef(ref); t != nil {
				dep := r.plan.Steps[t.index]
				if dep != top && !slices.Contains(r.deps[top], dep) {
					r.deps[top] = append(r.deps[top], dep)
				}
			}
		}
		collect = func(s *Step) {
			for _, c := range s.children() {
				collect(c)
			}
			r.tmpl.forEachRef(s.Arguments, need)
			r.tmpl.forEachRef(s.When, need)
			r.tmpl.forEachRef(s.ForEach, need)
		}
		collect(top)
	}
	r.sem = semaphore.NewWeighted(int64(r.lim.MaxParallel))
}

// scheduler dispatches the top-level steps of one run.
type scheduler struct {
	r        *run
	ctx      context.Context // the caller's
	pctx     context.Context // the plan's: the caller's with the plan's timeout
	results  chan *Step      // top-level steps whose goroutine ended
	started  []bool          // by top-level index
	finished []bool
	inflight int
	next     int  // the next top-level step (sequential schedule)
	first    int  // the first top-level step not started
	dag      bool // schedule "dag": a step starts when the steps it needs have ended
	// blocked is set when a top-level step waits for the client: the
	// sequential schedule starts nothing after it.
	blocked bool
}

// schedule runs the top-level steps from a plain loop, firing the state
// machine's events as they happen: in plan order, one at a time, or with
// schedule "dag" each as soon as the steps it references have ended. When
// a step halts the plan, or the plan's context ends (its timeout, or the
// caller's cancellation), nothing new starts; the steps in flight are
// waited for, and the steps that never started end as skipped.
func (r *run) schedule(ctx, pctx context.Context) {
	n := len(r.plan.Steps)
	sc := &scheduler{
		r: r, ctx: ctx, pctx: pctx, results: make(chan *Step, n),
		started: make([]bool, n), finished: make([]bool, n), dag: r.plan.Schedule == ScheduleDAG,
	}
	if r.m.Current() == fsm.StatePlanValidated { // a paused run taken up again is dispatching already
		r.fire(fsm.EventDispatch)
	}
	sc.reused()
	for {
		if r.dispatching() {
			sc.dispatch()
		}
		if sc.inflight == 0 {
			break
		}
		// Wait in awaiting_results: after one of several concurrent steps
		// (schedule dag) ended, the loop is back in dispatching_step even
		// when it started nothing new.
		if r.m.Current() == fsm.StateDispatchingStep {
			r.fire(fsm.EventStepsDispatched)
		}
		select {
		case s := <-sc.results:
			sc.landed(s)
			if pctx.Err() != nil && !r.endedWell(s) {
				// The plan's context ended too (a select between two
				// ready cases picks either): a step that did not
				// succeed ended because of it, and the cancellation or
				// the deadline stops the run, not the step's failure.
				r.stopFor(ctx)
			}
			r.fireLimit()
			if r.waits(s) {
				sc.wait(s)
				continue
			}
			if !r.dispatching() {
				r.stepEnded(s, fsm.EventStepFinished) // halted, timed out or cancelled: only draining
				continue
			}
			r.settle(s)
		case <-pctx.Done():
			r.stopFor(ctx)
			r.fireLimit()
			// The steps in flight see the same context and return.
			for sc.inflight > 0 {
				s := <-sc.results
				sc.landed(s)
				if r.waits(s) {
					r.abandon(s)
					continue
				}
				r.stepEnded(s, fsm.EventStepFinished)
			}
		}
	}
	if r.dispatching() && r.paused() {
		// Nothing more can run before the client's results come: the
		// steps that wait and those that never started stay as they are.
		r.fire(fsm.EventPause)
		return
	}
	for i, s := range r.plan.Steps {
		if !sc.started[i] {
			r.skip(s, nil)
		} else if r.waits(s) {
			r.abandon(s) // the run stopped while s waited for the client
		}
	}
	if r.dispatching() {
		r.fire(fsm.EventFinished)
	}
}

// fireLimit fires limit_exceeded once a limit stopped the run (loop.go).
func (r *run) fireLimit() {
	if !r.limitFired && r.limitHit.Load() {
		r.limitFired = true
		r.fire(fsm.EventLimitExceeded)
	}
}

// landed notes that the goroutine of top-level step s ended.
func (sc *scheduler) landed(s *Step) {
	sc.inflight--
	sc.finished[s.index] = true
}

// ready reports whether every step that s needs has ended.
func (sc *scheduler) ready(s *Step) bool {
	for _, d := range sc.r.deps[s] {
		if !sc.finished[d.index] {
			return false
		}
	}
	return true
}

// dispatch starts every top-level step that may start now.
func (sc *scheduler) dispatch() {
	r := sc.r
	for changed := true; changed; {
		changed = false
		// Steps before first have all started; the sequential schedule can
		// start only the step at next, and only when nothing is in flight.
		// (Scanning every step each time made long plans quadratic.)
		for i := sc.first; i < len(r.plan.Steps); i++ {
			s := r.plan.Steps[i]
			if sc.started[i] {
				if i == sc.first {
					sc.first++
				}
				if i == sc.next { // a step a resume did not run again
					sc.next++
				}
				continue
			}
			if !sc.dag && (i != sc.next || sc.inflight > 0 || sc.blocked) {
				break
			}
			if !sc.ready(s) {
				continue
			}
			if sc.pctx.Err() != nil {
				// The deadline or a cancellation came while no step it
				// could start had started: the steps it keeps from
				// starting make the plan fail, not complete.
				r.stopFor(sc.ctx)
				return
			}
			sc.started[i] = true
			sc.next = max(sc.next, i+1)
			changed = true
			if failed := r.failedDep(s); failed != nil {
				r.skip(s, &Error{StepID: s.ID, Code: CodeDependencyFailed, Message: fmt.Sprintf("not run: step %s, whose output it needs, did not succeed", failed.ID)})
				sc.finished[i] = true
				continue
			}
			if why := r.admit(s); why != nil {
				r.skipFor(s, why)
				sc.finished[i] = true
				continue
			}
			sc.inflight++
			r.startStep(s)
			r.inflight.Add(1)
			go func() {
				defer r.inflight.Done()
				r.runNode(sc.pctx, s)
				sc.results <- s
			}()
		}
	}
}

// settle ends top-level step s with the events of its outcome: it succeeded
// (or its group merged), it failed and the plan goes on (on_error
// "continue"), or it failed and the plan halts.
func (r *run) settle(s *Step) {
	r.mu.Lock()
	rec := r.records[s]
	status, panicked := rec.Status, rec.Error != nil && rec.Error.Code == CodePanic
	r.mu.Unlock()
	if s.IsGroup() {
		r.fire(fsm.EventParallelComplete)
		switch {
		case status == StatusSuccess || status == StatusPartial:
			r.stepEnded(s, fsm.EventMerged)
		case s.OnError == OnErrorContinue:
			r.stepEnded(s, fsm.EventStepFailedContinue)
		default:
			r.stop()
			r.addError(&Error{StepID: s.ID, Code: CodeHalted, Message: fmt.Sprintf("group %s failed; the plan halted and the remaining steps were skipped", s.ID)})
			if panicked {
				r.stepEnded(s, fsm.EventPanic)
			} else {
				r.stepEnded(s, fsm.EventStepFailed)
			}
		}
		return
	}
	switch {
	case status == StatusSuccess || status == StatusPartial:
		// A partial loop, or a step whose tool answered partially (an
		// agent's status partial), has an output: the plan goes on.
		r.stepEnded(s, fsm.EventStepSucceeded)
	case s.OnError == OnErrorContinue:
		r.stepEnded(s, fsm.EventStepFailedContinue)
	case panicked:
		r.stop()
		r.stepEnded(s, fsm.EventPanic)
	default:
		r.stop()
		r.stepEnded(s, fsm.EventStepFailed)
	}
}

// endedWell reports whether s ended as a success, or as a group that merged.
func (r *run) endedWell(s *Step) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.records[s].Status
	return st == StatusSuccess || st == StatusPartial
}

// failedDep returns a dependency of s that did not produce an output.
func (r *run) failedDep(s *Step) *Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.deps[s] {
		// A step a condition skipped is no failure: admit skips the
		// steps that need it.
		if rec := r.records[d]; rec.Status != StatusSuccess && rec.Status != StatusPartial && rec.Reason == nil {
			return d
		}
	}
	return nil
}
