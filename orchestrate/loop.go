package orchestrate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// A loop runs its body once per element of an array, each run an
// iteration: a copy of the body whose templates see the element as $<as>
// and its index as $<as>_index. Iterations are steps like any other: they
// start, end and are recorded (under the loop's record, with their index),
// and their tool calls count towards limits.max_tool_calls. The loop's
// output is the array of its iterations' outputs, in element order.

// iteration is what one run of a loop's body is for.
type iteration struct {
	loop  *Step
	index int
	item  any
}

// loopVars returns the names of the loop variables of p: each loop's as
// and as_index.
func (p *Plan) loopVars() map[string]bool {
	var vars map[string]bool
	for _, s := range p.All() {
		if s.IsLoop() && s.As != "" {
			if vars == nil {
				vars = map[string]bool{}
			}
			vars[s.As], vars[s.As+"_index"] = true, true
		}
	}
	return vars
}

// loopVar returns the value of loop variable name for step s: the element,
// or its index, of the innermost iteration s runs in whose loop defines it.
func loopVar(s *Step, name string) (any, bool) {
	for a := s; a != nil; a = a.parent {
		it := a.iter
		if it == nil {
			continue
		}
		switch name {
		case it.loop.As:
			return it.item, true
		case it.loop.As + "_index":
			return float64(it.index), true
		}
	}
	return nil, false
}

// leafCount counts the tool steps of s: itself, a group's children, a
// loop's body once.
func leafCount(s *Step) int {
	if !s.IsGroup() && !s.IsLoop() {
		return 1
	}
	n := 0
	for _, c := range s.children() {
		n += leafCount(c)
	}
	return n
}

// limitError says which limit stopped the run.
func limitError(format string, args ...any) *Error {
	return &Error{Code: CodeLimitExceeded, Message: fmt.Sprintf(format, args...)}
}

// exceed stops the run because a limit was reached; the scheduler then
// fires limit_exceeded. Only the first reason to stop counts.
func (r *run) exceed() {
	if r.stop() {
		r.limitHit.Store(true)
	}
}

// countCall counts one more tool call of the run against its budget
// node, and so against its request's: limits.max_tool_calls caps a run's
// and a request's calls, every iteration's, agent's and nested plan's
// counted.
func (r *run) countCall() *Error {
	if err := r.budget.Spend(budget.ToolCalls, 1); err != nil {
		r.exceed()
		return limitError("%v; loop over fewer elements (filter or slice the list with json_query first) or split the work into several calls", err)
	}
	return nil
}

// loopItems resolves the array loop l runs over.
func (r *run) loopItems(l *Step) ([]any, *Error) {
	src := l.ForEach
	if s, ok := src.(string); ok {
		t, err := r.tmpl.lookup(s)
		if err != nil {
			return nil, &Error{Code: CodeTemplateError, Message: err.Error()}
		}
		v, err := r.resolveTemplateIn(l, t, r.lim.MaxArgumentBytes)
		if err != nil {
			return nil, &Error{Code: CodeTemplateError, Message: fmt.Sprintf("for_each: %v", err)}
		}
		src = v
	}
	items, ok := src.([]any)
	if !ok {
		return nil, &Error{Code: CodeNotAnArray, Message: fmt.Sprintf("for_each %v is %s, not an array; reshape it with a json_query step (e.g. \"[.items[]]\")", l.ForEach, schemas.TypePhrase(src))}
	}
	return items, nil
}

// runLoop runs loop l: its body once per element, at most max_concurrency
// (and max_parallel) at once, then merges the outputs in element order.
func (r *run) runLoop(ctx context.Context, l *Step) {
	items, fail := r.loopItems(l)
	if fail == nil && len(items) > r.lim.MaxIterations {
		r.exceed()
		fail = limitError("for_each %s has %d elements; the limit is %d (limits.max_iterations). Loop over fewer: filter or slice the list with json_query first", l.ID, len(items), r.lim.MaxIterations)
	}
	if fail == nil {
		fail = r.loopFits(l, len(items))
	}
	if fail != nil {
		r.end(l, StatusFailed, nil, fail)
		return
	}
	iters := r.expand(l, len(items))

	limit := r.lim.MaxParallel
	if l.MaxConcurrency > 0 && l.MaxConcurrency < limit {
		limit = l.MaxConcurrency
	}
	var eg errgroup.Group
	eg.SetLimit(limit)
	var settled atomic.Bool // an iteration failed and halts the loop: no new one starts
	var unrecorded atomic.Pointer[Error]
	stopped := func() bool { return settled.Load() || ctx.Err() != nil || !r.dispatching() }
	// Whether an iteration runs is decided here, in element order, on one
	// probe of the body: an iteration that a condition skips is neither
	// copied nor started, and costs what deciding did.
	probe, probeIter := new(Step), new(iteration)
	for i, item := range items {
		if stopped() {
			break
		}
		*probeIter = iteration{loop: l, index: i, item: item}
		*probe = *l.Do
		probe.parent, probe.iter = l, probeIter
		if !r.runs(probe) {
			continue // skipped: counted in the loop's record (mergeLoop)
		}
		it := cloneBody(l, &iteration{loop: l, index: i, item: item})
		iters[i] = it
		eg.Go(func() error {
			if stopped() {
				return nil
			}
			if fail := r.recordIteration(l, it); fail != nil {
				unrecorded.CompareAndSwap(nil, fail)
				settled.Store(true)
				return nil
			}
			r.startStep(it)
			r.runNode(ctx, it)
			r.mu.Lock()
			status := r.records[it].Status
			r.mu.Unlock()
			if l.Merge == MergeCollect && status != StatusSuccess && status != StatusPartial && it.OnError != OnErrorContinue {
				settled.Store(true)
			}
			r.stepEnded(it, fsm.EventStepFinished)
			return nil
		})
	}
	_ = eg.Wait()
	r.mergeLoop(l, iters, unrecorded.Load())
}

// recordBytes is what the record of one step of an iteration counts
// against the run's budget of bytes held: the record itself, and its part
// of the envelope, about 460 bytes of JSON (384 records of loops make a
// 178 KB envelope), which the response holds once or twice more.
const recordBytes = 1 << 10

// recordIteration makes the record of iteration it, which is about to
// start, under the record of loop l, charging it against the run's bytes:
// an iteration that a condition skips has none (it costs what deciding
// did), and a loop cannot build more records than its request may hold.
func (r *run) recordIteration(l *Step, it *Step) *Error {
	if fail := r.bytes.charge(it.ID, int64(recordCount(it))*recordBytes); fail != nil {
		return fail
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.buildRecord(it)
	rec.Iteration = &it.iter.index
	lrec := r.records[l]
	lrec.Children = append(lrec.Children, rec)
	return nil
}

// recordCount counts the records of s: its own and its group's children's
// (a nested loop's iterations are counted as they start).
func recordCount(s *Step) int {
	n := 1
	for _, c := range s.Parallel {
		n += recordCount(c)
	}
	return n
}

// loopFits says why loop l cannot run its body n times within what its
// run's budget has left, or nil: its tool calls and its agent runs (each
// counted once per iteration; a nested loop's are counted as its own
// array resolves) must fit, and so must the records of its iterations.
func (r *run) loopFits(l *Step, n int) *Error {
	for _, need := range []struct {
		kind budget.Kind
		per  int
	}{{budget.ToolCalls, leafCount(l.Do)}, {budget.AgentRuns, agentCount(l.Do)}} {
		if want, left := int64(n*need.per), r.budget.Left(need.kind); want > left {
			r.exceed()
			c, _ := r.budget.Limit(need.kind)
			return limitError("for_each %s would make %d %s (%d elements); %d are left of the limit of %d (%s). Loop over fewer elements or split the work into several calls",
				l.ID, want, need.kind, n, left, c.Max, c.Key)
		}
	}
	return nil
}

// agentCount counts the agent steps of s, a loop's body once.
func agentCount(s *Step) int {
	if !s.IsGroup() && !s.IsLoop() {
		if s.Agent != "" || strings.HasPrefix(s.Tool, AgentToolPrefix) {
			return 1
		}
		return 0
	}
	n := 0
	for _, c := range s.children() {
		n += agentCount(c)
	}
	return n
}

// expand makes room for the n iterations of loop l (runLoop makes each
// that runs, and its record as it starts). The run's count of tool steps
// grows by what the loop adds, so that progress knows its total from now
// on; the iterations that do not run take theirs back (mergeLoop).
func (r *run) expand(l *Step, n int) []*Step {
	r.mu.Lock()
	r.records[l].Children = make([]*StepRecord, 0, min(n, 16))
	r.mu.Unlock()
	r.info.grow(n*leafCount(l.Do) - leafCount(l.Do))
	return make([]*Step, n)
}

// cloneBody copies the body of loop l for iteration it: the copies have
// their own ids (the loop's id, or the body step's, with the index) and
// paths, and share the body's arguments, which are only read.
func cloneBody(l *Step, it *iteration) *Step {
	suffix := "[" + strconv.Itoa(it.index) + "]"
	var clone func(orig, parent *Step, pos int, path string) *Step
	clone = func(orig, parent *Step, pos int, path string) *Step {
		c := new(Step)
		*c = *orig
		c.parent, c.path, c.ResultKey, c.iter = parent, path, "", nil
		switch {
		case orig.explicit:
			c.ID = orig.ID + suffix
		case parent == l:
			c.ID = l.ID + suffix
		default:
			c.ID = parent.ID + "." + strconv.Itoa(pos)
		}
		if parent == l {
			c.iter = it
		}
		if orig.Parallel != nil {
			c.Parallel = make([]*Step, len(orig.Parallel))
			for i, ch := range orig.Parallel {
				c.Parallel[i] = clone(ch, c, i, path+".parallel["+strconv.Itoa(i)+"]")
			}
		}
		return c
	}
	return clone(l.Do, l, 0, l.path+".do["+strconv.Itoa(it.index)+"]")
}

// mergeLoop sets the loop's status and output from its iterations: the
// array of their outputs, null where one failed or did not run. With
// merge "collect" a failed iteration fails the loop (unless its body has
// on_error "continue"); with "all_settled" it makes the loop partial. The
// iterations that did not run (a condition skipped them, or the loop
// stopped first) have no record: the loop's record counts them. unrecorded,
// when set, is why an iteration could not start: the budget of bytes its
// record needed was spent; it fails the loop.
func (r *run) mergeLoop(l *Step, iters []*Step, unrecorded *Error) {
	r.mu.Lock()
	out := make([]any, len(iters))
	status := StatusSuccess
	var fail *Error
	if unrecorded != nil {
		status = StatusFailed
		fail = &Error{StepID: l.ID, Code: unrecorded.Code, Message: fmt.Sprintf("iteration %s could not start: %s", unrecorded.StepID, unrecorded.Message)}
	}
	skipped := 0
	for i, it := range iters {
		var rec *StepRecord
		if it != nil {
			rec = r.records[it]
		}
		if rec == nil { // it never started
			skipped++
			continue
		}
		if o, ok := r.outputs[it]; ok {
			out[i] = o
		}
		switch rec.Status {
		case StatusSuccess, StatusSkipped:
		case StatusPartial:
			if status == StatusSuccess {
				status = StatusPartial
			}
		default:
			if l.Merge == MergeCollect && it.OnError != OnErrorContinue {
				if status != StatusFailed && rec.Error != nil {
					fail = &Error{StepID: l.ID, Code: rec.Error.Code, Message: fmt.Sprintf("iteration %d (%s) failed: %s", i, it.ID, rec.Error.Message)}
				}
				status = StatusFailed
			} else if status == StatusSuccess {
				status = StatusPartial
			}
		}
	}
	lrec := r.records[l]
	lrec.SkippedIterations = skipped
	slices.SortFunc(lrec.Children, func(a, b *StepRecord) int { return *a.Iteration - *b.Iteration })
	r.mu.Unlock()
	r.info.grow(-skipped * leafCount(l.Do))
	if status == StatusFailed {
		if fail == nil {
			fail = &Error{StepID: l.ID, Code: CodeToolError, Message: "an iteration failed"}
		}
		r.end(l, status, nil, fail)
		r.mu.Lock()
		r.records[l].Output = out // what the iterations made, for the record
		r.mu.Unlock()
		return
	}
	r.end(l, status, out, nil)
}

// TypeForEach is the type of a loop's record.
const TypeForEach = "for_each"
