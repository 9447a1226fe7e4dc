package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// run is one orchestration.
type run struct {
	e       *Engine
	req     *Request
	plan    *Plan
	lim     Limits
	m       *fsm.Machine
	fireCtx context.Context // the run's context, never cancelled, for firing events
	execID  string
	ids     toolcontext.IDs
	depth   int
	info    *RunInfo
	started time.Time
	sem     *semaphore.Weighted
	names   map[string]*Step // ids and result keys
	deps    map[*Step][]*Step
	tmpl    templateCache // filled by validation and prepare; read-only while steps run

	mu       sync.Mutex // guards the fields below and the records' contents
	records  map[*Step]*StepRecord
	outputs  map[*Step]any
	errors   []*Error
	valid    *Validation
	planInfo *PlannerInfo
	final    *Envelope
	record   string // _metadata.record

	halting atomic.Bool // nothing new starts
	bytes   runBytes    // what the run's outputs and arguments hold
}

// observe turns state machine transitions into events for the observers.
func (r *run) observe(t fsm.Transition) {
	if len(r.e.opts.Observers) == 0 {
		return
	}
	ev := Event{Run: r.info, Transition: t}
	switch d := t.Detail.(type) {
	case *StepRecord:
		ev.Step = d
	case *Envelope:
		ev.Envelope = d
	}
	for _, o := range r.e.opts.Observers {
		o(ev)
	}
}

func (r *run) fire(_ context.Context, event string, detail any) {
	// The machine runs no callbacks that read the context; one that cannot
	// be cancelled, made once per run, spares an allocation per event.
	if err := r.m.Fire(r.fireCtx, event, detail); err != nil {
		// The executor's logic and the transition table disagree: a bug.
		r.e.log.Error("state machine", "exec_id", r.execID, "event", event, "state", r.m.Current(), "err", err)
	}
}

// run drives the orchestration from start to envelope.
func (r *run) run(ctx context.Context, planner PlanFunc) (env *Envelope) {
	defer func() {
		if v := recover(); v != nil {
			r.e.log.Error("orchestration panicked", "exec_id", r.execID, "panic", v, "stack", string(debug.Stack()))
			r.mu.Lock()
			r.errors = append(r.errors, &Error{Code: CodePanic, Message: fmt.Sprintf("internal error: %v", v)})
			r.mu.Unlock()
			if !r.m.Done() {
				r.fire(ctx, fsm.EventPanic, nil)
			}
			env = r.finish(ctx)
		}
	}()
	if r.depth >= r.lim.MaxDepth {
		r.errors = append(r.errors, &Error{Code: CodeDepthExceeded, Message: fmt.Sprintf("orchestration depth %d reached the limit of %d: a plan's tool may not start another orchestration this deep", r.depth+1, r.lim.MaxDepth)})
		r.fire(ctx, fsm.EventValidationFailed, nil)
		return r.finish(ctx)
	}

	if planner != nil {
		r.fire(ctx, fsm.EventStartPlan, nil)
		plan, info, issues, err := planner(ctx)
		r.planInfo = info
		if plan != nil {
			r.plan = plan
		}
		if err != nil || len(issues) > 0 {
			if issues == nil {
				issues = []*Issue{}
			}
			r.valid = &Validation{Errors: issues, Warnings: []*Issue{}}
			if err != nil {
				r.errors = append(r.errors, &Error{Code: plannerCode(ctx, err), Message: err.Error()})
			}
			r.fire(ctx, fsm.EventValidationFailed, nil)
			return r.finish(ctx)
		}
		r.tmpl = newTemplateCache(plan)
		r.valid = r.e.validateWith(plan, r.lim, r.req.Bindings, r.tmpl)
		if !r.valid.OK() {
			r.errors = append(r.errors, &Error{Code: CodeValidation, Message: "the planner's plan is invalid; see validation_errors"})
			r.fire(ctx, fsm.EventValidationFailed, nil)
			return r.finish(ctx)
		}
		r.fire(ctx, fsm.EventPlannerFinished, nil)
	} else {
		r.plan = r.req.Plan
		if r.plan == nil {
			r.errors = append(r.errors, &Error{Code: CodeInvalidRequest, Message: "the request has no plan; send {\"plan\": {\"steps\": [...]}}"})
			r.fire(ctx, fsm.EventValidationFailed, nil)
			return r.finish(ctx)
		}
		r.tmpl = newTemplateCache(r.plan)
		r.valid = r.e.validateWith(r.plan, r.lim, r.req.Bindings, r.tmpl)
		if !r.valid.OK() {
			r.errors = append(r.errors, &Error{Code: CodeValidation, Message: fmt.Sprintf("the plan has %d validation errors; nothing ran", len(r.valid.Errors))})
			r.fire(ctx, fsm.EventValidationFailed, nil)
			return r.finish(ctx)
		}
		r.fire(ctx, fsm.EventValidated, nil)
	}
	r.info.Plan = r.plan
	r.info.Leaves = len(r.plan.Leaves())
	r.m.Grow(3*r.info.Leaves + 4) // about three events per step
	r.prepare()
	if r.req.DryRun || r.plan.Type == "direct_response" {
		for _, s := range r.plan.Steps {
			r.skipTree(s, nil) // nothing runs
		}
		r.fire(ctx, fsm.EventDispatch, nil)
		r.fire(ctx, fsm.EventFinished, nil)
		return r.finish(ctx)
	}

	pctx, cancel := context.WithTimeout(ctx, r.lim.PlanTimeout)
	defer cancel()
	pctx = toolcontext.WithDepth(pctx, r.depth+1)
	r.execute(ctx, pctx)
	return r.finish(ctx)
}

func plannerCode(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return CodeCancelled
	}
	return CodePlannerFailed
}

func (e *Engine) validateWith(p *Plan, lim Limits, bindings map[string]any, tmpl templateCache) *Validation {
	return validateCached(p, e.opts.Tools, lim, bindings, e.opts.Forbidden, tmpl)
}

// prepare builds the records, the name index and the dependencies.
func (r *run) prepare() {
	all := r.plan.All()
	r.names = make(map[string]*Step, len(all))
	if len(r.records) == 0 {
		r.records = make(map[*Step]*StepRecord, len(all))
		r.outputs = make(map[*Step]any, len(all))
	}
	for _, s := range all {
		if s.explicit {
			r.names[s.ID] = s
		}
		if s.ResultKey != "" {
			r.names[s.ResultKey] = s
		}
	}
	var build func(s *Step) *StepRecord
	build = func(s *Step) *StepRecord {
		rec := &StepRecord{ID: s.ID, Index: s.index, Path: s.path, Tool: s.Tool, ResultKey: s.ResultKey, Status: StatusPending, step: s}
		if s.IsGroup() {
			rec.Type, rec.Merge = "parallel", s.Merge
			rec.Children = make([]*StepRecord, 0, len(s.Parallel))
			for _, c := range s.Parallel {
				rec.Children = append(rec.Children, build(c))
			}
		} else {
			rec.Type = "tool"
		}
		r.records[s] = rec
		return rec
	}
	for _, s := range r.plan.Steps {
		build(s)
	}
	r.deps = make(map[*Step][]*Step, len(r.plan.Steps))
	for _, top := range r.plan.Steps {
		var collect func(s *Step)
		collect = func(s *Step) {
			for _, c := range s.Parallel {
				collect(c)
			}
			r.tmpl.forEachRef(s.Arguments, func(ref *Ref) {
				if ref.IsBinding() {
					return
				}
				if t := r.lookupRef(ref); t != nil {
					dep := r.plan.Steps[t.index]
					if dep != top && !slices.Contains(r.deps[top], dep) {
						r.deps[top] = append(r.deps[top], dep)
					}
				}
			})
		}
		collect(top)
	}
	r.sem = semaphore.NewWeighted(int64(r.lim.MaxParallel))
}

func (r *run) lookupRef(ref *Ref) *Step {
	if idx, ok := ref.StepIndex(); ok {
		if idx < len(r.plan.Steps) {
			return r.plan.Steps[idx]
		}
		return nil
	}
	return r.names[ref.Step]
}

// forEachRef calls f for every reference in the templates of v.
func forEachRef(v any, f func(*Ref)) { templateCache(nil).forEachRef(v, f) }

// forEachRef calls f for every reference in the templates of v, parsing
// each string once.
func (c templateCache) forEachRef(v any, f func(*Ref)) {
	switch v := v.(type) {
	case string:
		if !mayBeTemplate(v) {
			return
		}
		if t, err := c.parse(v); err == nil {
			switch t.Kind {
			case Whole:
				f(t.Ref)
			case Interpolated:
				for _, p := range t.Parts {
					if p.Ref != nil {
						f(p.Ref)
					}
				}
			}
		}
	case map[string]any:
		for _, e := range v {
			c.forEachRef(e, f)
		}
	case []any:
		for _, e := range v {
			c.forEachRef(e, f)
		}
	}
}

// execute runs the top-level steps from a plain loop, firing the state
// machine's events as they happen.
func (r *run) execute(ctx, pctx context.Context) {
	r.fire(ctx, fsm.EventDispatch, nil)
	type done struct{ s *Step }
	results := make(chan done, len(r.plan.Steps))
	started := map[*Step]bool{}
	finished := map[*Step]bool{}
	inflight := 0
	next := 0  // the next top-level step (sequential schedule)
	first := 0 // the first top-level step not started
	stopped := func() {
		// The plan's deadline passed or the caller cancelled.
		r.halting.Store(true)
		if r.m.Done() {
			return
		}
		if ctx.Err() != nil {
			r.addError(&Error{Code: CodeCancelled, Message: "the caller cancelled the orchestration"})
			r.fire(ctx, fsm.EventCancelled, nil)
		} else {
			r.addError(&Error{Code: CodeTimeout, Message: fmt.Sprintf("the plan did not finish within its timeout of %s; raise timeout_ms or make the plan shorter", r.lim.PlanTimeout)})
			r.fire(ctx, fsm.EventTimeout, nil)
		}
	}

	ready := func(s *Step) bool {
		for _, d := range r.deps[s] {
			if !finished[d] {
				return false
			}
		}
		return true
	}
	for {
		if !r.halting.Load() && pctx.Err() == nil && !r.m.Done() {
			for changed := true; changed; {
				changed = false
				// Steps before first have all started; the sequential
				// schedule can start only the step at next, and only when
				// nothing is in flight. (Scanning every step each time made
				// long plans quadratic.)
				for i := first; i < len(r.plan.Steps); i++ {
					s := r.plan.Steps[i]
					if started[s] {
						if i == first {
							first++
						}
						continue
					}
					if r.plan.Schedule != ScheduleDAG && (i != next || inflight > 0) {
						break
					}
					if !ready(s) {
						continue
					}
					started[s] = true
					next = max(next, i+1)
					changed = true
					if failed := r.failedDep(s); failed != nil {
						r.skipTree(s, &Error{StepID: s.ID, Code: CodeDependencyFailed, Message: fmt.Sprintf("not run: step %s, whose output it needs, did not succeed", failed.ID)})
						finished[s] = true
						r.fire(ctx, fsm.EventStepFinished, r.snapshot(s))
						continue
					}
					inflight++
					r.markStarted(s)
					r.fire(ctx, fsm.EventStepStarted, r.detail(s))
					go func() {
						defer func() { results <- done{s} }()
						r.runNode(pctx, s)
					}()
				}
			}
		}
		if inflight == 0 {
			break
		}
		// Wait in awaiting_results: after one of several concurrent steps
		// (schedule dag) ended, the loop is back in dispatching_step even
		// when it started nothing new.
		if r.m.Current() == fsm.StateDispatchingStep {
			r.fire(ctx, fsm.EventStepsDispatched, nil)
		}
		select {
		case d := <-results:
			inflight--
			finished[d.s] = true
			if r.m.Done() {
				continue // halted, timed out or cancelled: only draining
			}
			r.outcome(ctx, d.s)
		case <-pctx.Done():
			stopped()
			// In-flight steps see the same context and return; wait for them.
			for inflight > 0 {
				d := <-results
				inflight--
				finished[d.s] = true
			}
		}
	}
	unstarted := false
	for _, s := range r.plan.Steps {
		if !started[s] {
			unstarted = true
			r.skipTree(s, nil)
		}
	}
	// The deadline or a cancellation may come while no step is in flight
	// (before the first one, or between two): the steps it kept from
	// starting make the plan fail, not complete.
	if unstarted && pctx.Err() != nil {
		stopped()
	}
	if !r.m.Done() {
		r.fire(ctx, fsm.EventFinished, nil)
	}
}

// outcome fires the events for a finished top-level step.
func (r *run) outcome(ctx context.Context, s *Step) {
	rec := r.snapshot(s)
	if s.IsGroup() {
		r.fire(ctx, fsm.EventParallelComplete, rec)
		switch {
		case rec.Status == StatusSuccess || rec.Status == StatusPartial:
			r.fire(ctx, fsm.EventMerged, rec)
		case s.OnError == OnErrorContinue:
			r.fire(ctx, fsm.EventStepFailedContinue, rec)
		default:
			r.halting.Store(true)
			r.addError(&Error{StepID: s.ID, Code: CodeHalted, Message: fmt.Sprintf("group %s failed; the plan halted and the remaining steps were skipped", s.ID)})
			if rec.Error != nil && rec.Error.Code == CodePanic {
				r.fire(ctx, fsm.EventPanic, rec)
			} else {
				r.fire(ctx, fsm.EventStepFailed, rec)
			}
		}
		return
	}
	switch {
	case rec.Status == StatusSuccess:
		r.fire(ctx, fsm.EventStepSucceeded, rec)
	case s.OnError == OnErrorContinue:
		r.fire(ctx, fsm.EventStepFailedContinue, rec)
	case rec.Error != nil && rec.Error.Code == CodePanic:
		r.halting.Store(true)
		r.fire(ctx, fsm.EventPanic, rec)
	default:
		r.halting.Store(true)
		r.fire(ctx, fsm.EventStepFailed, rec)
	}
}

// failedDep returns a dependency of s that did not produce an output.
func (r *run) failedDep(s *Step) *Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.deps[s] {
		if st := r.records[d].Status; st != StatusSuccess && st != StatusPartial {
			return d
		}
	}
	return nil
}

func (r *run) addError(e *Error) {
	r.mu.Lock()
	r.errors = append(r.errors, e)
	r.mu.Unlock()
}

// detail is the detail of an event about s: its snapshot, or nil when no
// observer would read it.
func (r *run) detail(s *Step) *StepRecord {
	if len(r.e.opts.Observers) == 0 {
		return nil
	}
	return r.snapshot(s)
}

// snapshot copies the record of s for observers.
func (r *run) snapshot(s *Step) *StepRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := *r.records[s]
	cp.Children = nil
	return &cp
}

func (r *run) markStarted(s *Step) {
	now := time.Now()
	r.mu.Lock()
	rec := r.records[s]
	rec.Status = StatusRunning
	rec.StartedAt = &now
	rec.ExecID = r.e.opts.NewID()
	r.mu.Unlock()
}

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

// skipTree marks s and its children skipped (when they have not run).
func (r *run) skipTree(s *Step, why *Error) {
	r.mu.Lock()
	var walk func(s *Step)
	walk = func(s *Step) {
		rec := r.records[s]
		if rec.Status == StatusPending {
			rec.Status = StatusSkipped
		}
		for _, c := range s.Parallel {
			walk(c)
		}
	}
	walk(s)
	if why != nil {
		r.records[s].Error = why
	}
	r.mu.Unlock()
}

// runNode runs a step or group; it never panics.
func (r *run) runNode(ctx context.Context, s *Step) {
	defer func() {
		if v := recover(); v != nil {
			r.e.log.Error("step panicked", "exec_id", r.execID, "step_id", s.ID, "panic", v, "stack", string(debug.Stack()))
			r.end(s, StatusFailed, nil, &Error{Code: CodePanic, Message: fmt.Sprintf("internal error: %v", v)})
		}
	}()
	if s.IsGroup() {
		r.runGroup(ctx, s)
	} else {
		r.runLeaf(ctx, s)
	}
}

// runGroup runs a parallel group's children and merges their outputs.
func (r *run) runGroup(ctx context.Context, g *Step) {
	limit := r.lim.MaxParallel
	if g.MaxConcurrency > 0 && g.MaxConcurrency < limit {
		limit = g.MaxConcurrency
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var eg errgroup.Group
	eg.SetLimit(limit)
	var stop atomic.Bool // no new child starts
	var winner atomic.Pointer[Step]
	for _, c := range g.Parallel {
		if stop.Load() || gctx.Err() != nil || r.halting.Load() {
			break
		}
		eg.Go(func() error {
			if stop.Load() || gctx.Err() != nil || r.halting.Load() {
				return nil
			}
			r.markStarted(c)
			r.fire(ctx, fsm.EventStepStarted, r.detail(c))
			r.runNode(gctx, c)
			rec := r.snapshot(c)
			r.fire(ctx, fsm.EventStepFinished, rec)
			switch g.Merge {
			case MergeFirstSuccess:
				if rec.Status == StatusSuccess && winner.CompareAndSwap(nil, c) {
					stop.Store(true)
					cancel()
				}
			case MergeCollect:
				if rec.Status != StatusSuccess && rec.Status != StatusPartial && c.OnError != OnErrorContinue {
					stop.Store(true)
				}
			}
			return nil
		})
	}
	_ = eg.Wait()
	for _, c := range g.Parallel {
		r.skipTree(c, nil)
	}

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
		w := winner.Load()
		for _, c := range g.Parallel {
			if crec := r.records[c]; c != w && crec.Status == StatusFailed && crec.Error != nil && crec.Error.Code == CodeCancelled {
				crec.Status = StatusCancelled
			}
		}
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

// runLeaf runs one tool step with its retries.
func (r *run) runLeaf(ctx context.Context, s *Step) {
	args, terr := r.resolveArgs(s)
	if terr != nil {
		r.end(s, StatusFailed, nil, terr)
		return
	}
	r.mu.Lock()
	r.records[s].Arguments = args
	r.mu.Unlock()
	tool, ok := r.e.opts.Tools.Lookup(s.Tool)
	if !ok {
		r.end(s, StatusFailed, nil, &Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("tool %q is no longer available (its server may have stopped); retry later", s.Tool)})
		return
	}
	if err := r.sem.Acquire(ctx, 1); err != nil {
		r.end(s, ctxStatus(ctx), nil, r.ctxError(ctx, nil))
		return
	}
	defer r.sem.Release(1)

	timeout := r.lim.StepTimeout
	if s.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(s.TimeoutMS)*time.Millisecond)
	}
	attempts := 1
	var backoff, maxBackoff time.Duration
	if s.Retry != nil {
		attempts = s.Retry.MaxAttempts
		backoff = time.Duration(s.Retry.BackoffMS) * time.Millisecond
		maxBackoff = time.Duration(s.Retry.MaxBackoffMS) * time.Millisecond
	}
	if maxBackoff == 0 {
		maxBackoff = 30 * time.Second
	}
	progress := r.progressFunc(s)
	ctx = r.stepContext(ctx, s)
	for attempt := 1; ; attempt++ {
		r.mu.Lock()
		r.records[s].Attempts = attempt
		r.mu.Unlock()
		actx, cancel := context.WithTimeout(ctx, timeout)
		res, err := tool.Invoke(actx, &registry.CallRequest{Arguments: args, Progress: progress})
		stepTimedOut := actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		if err == nil && !res.IsError {
			out := res.Output()
			if n, ok := jsonSizeWithin(out, r.lim.MaxRunBytes); ok {
				if fail := r.bytes.charge(s.ID, int64(n)); fail != nil {
					r.end(s, StatusFailed, nil, fail)
					return
				}
			}
			r.mu.Lock()
			rec := r.records[s]
			rec.SkillID = skillID(out)
			rec.Content = nonText(res.Content)
			r.mu.Unlock()
			r.end(s, StatusSuccess, out, nil)
			return
		}
		var fail *Error
		var failedOutput any // a failed tool's structured result, kept in the record
		retryable := false
		var perr *registry.PanicError
		switch {
		case err == nil: // res.IsError
			fail = &Error{Code: CodeToolError, Message: toolErrorMessage(res.Text(), res.Structured != nil)}
			failedOutput = res.Structured
		case errors.As(err, &perr):
			r.e.log.Error("tool panicked", "exec_id", r.execID, "step_id", s.ID, "tool", s.Tool, "panic", perr.Value, "stack", string(perr.Stack))
			fail = &Error{Code: CodePanic, Message: perr.Error()}
		case ctx.Err() != nil:
			r.end(s, ctxStatus(ctx), nil, r.ctxError(ctx, err))
			return
		case stepTimedOut:
			fail = &Error{Code: CodeTimeout, Message: fmt.Sprintf("tool %s did not answer within %s; raise the step's timeout_ms or check the tool", s.Tool, timeout)}
			retryable = true
		case errors.Is(err, registry.ErrServerUnavailable):
			fail = &Error{Code: CodeServerUnavailable, Message: err.Error()}
			retryable = registry.IsTransient(err)
		default:
			fail = &Error{Code: CodeToolError, Message: err.Error()}
			retryable = registry.IsTransient(err)
		}
		if !retryable || attempt >= attempts {
			r.end(s, StatusFailed, nil, fail)
			if failedOutput != nil {
				r.mu.Lock()
				r.records[s].Output = failedOutput
				r.mu.Unlock()
			}
			return
		}
		r.e.log.Warn("retrying step", "exec_id", r.execID, "step_id", s.ID, "tool", s.Tool, "attempt", attempt, "code", fail.Code, "err", fail.Message)
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				r.end(s, ctxStatus(ctx), nil, r.ctxError(ctx, nil))
				return
			}
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

func ctxStatus(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.Canceled) {
		return StatusCancelled
	}
	return StatusFailed
}

func (r *run) ctxError(ctx context.Context, cause error) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Code: CodeDeadlineExceeded, Message: fmt.Sprintf("stopped: the plan's timeout of %s passed while the step ran", r.lim.PlanTimeout)}
	}
	msg := "cancelled before it finished"
	if cause != nil && !errors.Is(cause, context.Canceled) {
		msg += " (" + cause.Error() + ")"
	}
	return &Error{Code: CodeCancelled, Message: msg}
}

func (r *run) progressFunc(s *Step) func(registry.Progress) {
	if len(r.e.opts.Observers) == 0 {
		return nil
	}
	return func(p registry.Progress) {
		state := r.m.Current()
		ev := Event{Run: r.info, Transition: fsm.Transition{Event: EventProgress, From: state, To: state, At: time.Now()}, Step: r.snapshot(s), Progress: &p}
		for _, o := range r.e.opts.Observers {
			o(ev)
		}
	}
}

// nonText keeps the content blocks that are not text.
func nonText(cs []mcp.Content) []mcp.Content {
	var out []mcp.Content
	for _, c := range cs {
		if _, ok := c.(*mcp.TextContent); !ok {
			out = append(out, c)
		}
	}
	return out
}

// maxErrorMessage caps the message of a tool error in the envelope; the
// full result stays in the step's output.
const maxErrorMessage = 1024

// toolErrorMessage makes the message of a tool that reported an error: its
// text, cut to its first paragraph or maxErrorMessage bytes when longer (a
// failed downstream orchestration sends a summary, then its whole envelope).
func toolErrorMessage(text string, structured bool) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return "the tool reported an error without a message"
	}
	if len(text) <= maxErrorMessage {
		return text
	}
	cut := text
	if i := strings.Index(text, "\n\n"); i > 0 && i <= maxErrorMessage {
		cut = text[:i]
	} else {
		cut = strings.ToValidUTF8(text[:maxErrorMessage], "") + "…"
	}
	if structured {
		return cut + " (the full result is in the step's output)"
	}
	return cut + fmt.Sprintf(" (%d bytes in all)", len(text))
}

// resolveArgs resolves the templates in the arguments of s, within
// limits.max_argument_bytes: the budget is kept while resolving, so that a
// value referenced a thousand times fails the step before it is copied
// once too often.
func (r *run) resolveArgs(s *Step) (map[string]any, *Error) {
	var fail *Error
	room := r.lim.MaxArgumentBytes
	tooLarge := func(path []Seg) *Error {
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf("the arguments resolve to more than %s of JSON (limits.max_argument_bytes), passing the limit at argument %s; "+
			"pass less: select the fields the tool needs with json_query, or reference a value once", formatBytes(int64(r.lim.MaxArgumentBytes)), argName(path))}
	}
	// path is used as a stack; it is read only to name a failing argument.
	var resolve func(v any, path []Seg) any
	resolve = func(v any, path []Seg) any {
		if fail != nil {
			return nil
		}
		switch v := v.(type) {
		case string:
			if !mayBeTemplate(v) {
				if room -= len(v); room < 0 {
					fail = tooLarge(path)
				}
				return v
			}
			t, err := r.tmpl.lookup(v)
			if err != nil {
				fail = &Error{Code: CodeTemplateError, Message: err.Error()}
				return nil
			}
			out, err := r.resolveTemplate(t, room)
			var big *errTooLarge
			if errors.As(err, &big) {
				fail = tooLarge(path)
				return nil
			}
			if err != nil {
				fail = &Error{Code: CodeTemplateError, Message: fmt.Sprintf("argument %s: %v", argName(path), err)}
				return nil
			}
			if n, ok := jsonSizeWithin(out, room); ok {
				if room -= n; room < 0 {
					fail = tooLarge(path)
				}
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = resolve(e, append(path, Seg{Key: k}))
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = resolve(e, append(path, Seg{Index: i, IsIndex: true}))
			}
			return out
		}
		return v
	}
	var stack [8]Seg
	args := resolve(s.Arguments, stack[:0])
	if fail != nil {
		return nil, fail
	}
	if err := r.bytes.charge(s.ID, int64(r.lim.MaxArgumentBytes-room)); err != nil {
		return nil, err
	}
	m, _ := args.(map[string]any)
	return m, nil
}

// resolveTemplate resolves t; an interpolated string longer than room
// fails with *errTooLarge before it is built.
func (r *run) resolveTemplate(t *Template, room int) (any, error) {
	switch t.Kind {
	case Literal:
		return t.Literal, nil
	case Whole:
		return r.resolveRef(t.Ref)
	}
	var b []byte
	for _, p := range t.Parts {
		if p.Ref == nil {
			b = append(b, p.Text...)
			continue
		}
		v, err := r.resolveRef(p.Ref)
		if err != nil {
			return nil, err
		}
		if s, ok := v.(string); ok {
			if len(b)+len(s) > room {
				return nil, &errTooLarge{room}
			}
			b = append(b, s...)
			continue
		}
		if n, ok := jsonSizeWithin(v, room-len(b)); ok && len(b)+n > room {
			return nil, &errTooLarge{room}
		}
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Ref.Text, err)
		}
		b = append(b, data...)
	}
	return string(b), nil
}

func (r *run) resolveRef(ref *Ref) (any, error) {
	var root any
	if ref.IsBinding() {
		v, ok := r.req.Bindings[ref.Binding]
		if !ok {
			return nil, fmt.Errorf("%s: no binding %q", ref.Text, ref.Binding)
		}
		root = v
	} else {
		t := r.lookupRef(ref)
		if t == nil {
			return nil, fmt.Errorf("%s: no such step", ref.Text)
		}
		r.mu.Lock()
		v, ok := r.outputs[t]
		r.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%s: step %s produced no output", ref.Text, t.ID)
		}
		root = v
	}
	v, err := followPath(root, ref.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Text, err)
	}
	return v, nil
}

// finish builds the envelope and fires nothing further.
func (r *run) finish(ctx context.Context) *Envelope {
	defer r.bytes.releaseAll()
	env := r.envelope()
	r.final = env
	// The final transition happened already; tell observers about the envelope.
	if len(r.e.opts.Observers) > 0 {
		state := r.m.Current()
		ev := Event{Run: r.info, Transition: fsm.Transition{Event: EventFinal, From: state, To: state, At: time.Now()}, Envelope: env}
		for _, o := range r.e.opts.Observers {
			o(ev)
		}
	}
	// Nothing fires after this; a late progress callback still reads the
	// state the run ended in.
	r.m.Release()
	return env
}

// EventFinal is the Transition.Event of the last event of a run, which
// carries the envelope.
const EventFinal = "final"

// nestsDeeper reports whether a group of p nests deeper than limit.
func nestsDeeper(p *Plan, limit int) bool {
	for _, s := range p.All() {
		if s.IsGroup() && s.depth >= limit {
			return true
		}
	}
	return false
}

func (r *run) envelope() *Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &Artifact{Plan: r.plan, Steps: []*StepRecord{}, Errors: []*Error{}, ValidationErrors: []*Issue{}, Planner: r.planInfo}
	// A plan over max_steps or max_nesting is neither echoed nor listed
	// step by step: a 10,000-step plan, or groups nested 400 deep (whose
	// indented text grows with the square of the depth), would make a
	// response of megabytes that says only that the plan is too large.
	oversized := r.plan != nil && (len(r.plan.Leaves()) > r.lim.MaxSteps || nestsDeeper(r.plan, r.lim.MaxNesting))
	if oversized {
		a.Plan = nil
	}
	a.Bindings = map[string]any{}
	maps.Copy(a.Bindings, r.req.Bindings)
	if r.valid != nil {
		a.ValidationErrors = r.valid.Errors
		if len(r.valid.Warnings) > 0 {
			a.Warnings = r.valid.Warnings
		}
	}
	if r.plan != nil && len(r.records) == 0 && !oversized {
		r.mu.Unlock()
		r.prepare() // an invalid plan still lists its steps, all skipped
		r.mu.Lock()
		for _, rec := range r.records {
			rec.Status = StatusSkipped
		}
	}
	if r.plan != nil {
		for _, s := range r.plan.Steps {
			if rec, ok := r.records[s]; ok {
				a.Steps = append(a.Steps, rec)
			}
		}
		for s, out := range r.outputs {
			if s.ResultKey != "" {
				a.Bindings[s.ResultKey] = out
			}
		}
		if r.plan.Type == "direct_response" {
			a.Response = r.plan.Content
		}
	}
	a.Errors = append(a.Errors, r.errors...)
	for _, e := range a.Errors {
		r.redactError(e)
	}
	r.redactIssues(a.ValidationErrors)
	// The errors of tool steps and of skipped steps, except the losers a
	// won first_success race cancelled: cancelling them is the strategy
	// working, not a failure.
	var stepErrs []*Error
	var walk func(rs []*StepRecord, wonRace bool)
	walk = func(rs []*StepRecord, wonRace bool) {
		for _, rec := range rs {
			if rec.Error != nil && (rec.Type == "tool" || rec.Status == StatusSkipped) && !(wonRace && rec.Status == StatusCancelled) {
				stepErrs = append(stepErrs, rec.Error)
			}
			walk(rec.Children, rec.Merge == MergeFirstSuccess && rec.Status == StatusSuccess)
		}
	}
	walk(a.Steps, false)
	// A group's status sums up its children, so the plan's status follows
	// from the top-level steps.
	anyFailed := false
	for _, rec := range a.Steps {
		if rec.Status == StatusFailed || rec.Status == StatusPartial || rec.Status == StatusCancelled || (rec.Status == StatusSkipped && rec.Error != nil) {
			anyFailed = true
		}
	}
	a.Errors = append(append([]*Error{}, stepErrs...), a.Errors...)
	a.DryRun = r.req.DryRun
	switch {
	case r.m.Current() == fsm.StateFailed || len(a.ValidationErrors) > 0 || (r.m.Current() != fsm.StateCompleted):
		a.Status = StatusFailed
	case anyFailed:
		a.Status = StatusPartial
	default:
		a.Status = StatusSuccess
	}
	a.Success = a.Status == StatusSuccess
	capOutputs(a, r.lim.MaxStepOutputBytes, r.lim.MaxResponseBytes)
	return &Envelope{
		ArtifactID: r.execID,
		Artifact:   a,
		Metadata: Metadata{
			ContextID:  r.ids.ContextID,
			RequestID:  r.ids.RequestID,
			TraceID:    r.ids.TraceID,
			UserID:     r.ids.UserID,
			ToolName:   r.e.opts.ToolName,
			ExecutedAt: r.started.UTC().Format(time.RFC3339Nano),
			DurationMS: time.Since(r.started).Milliseconds(),
			Depth:      r.depth,
			ExecID:     r.execID,
			Record:     r.record,
		},
	}
}
