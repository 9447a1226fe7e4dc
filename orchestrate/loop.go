package orchestrate

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

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

// countCall counts one more tool call of the run against
// limits.max_tool_calls.
func (r *run) countCall() *Error {
	if n := r.toolCalls.Add(1); n > int64(r.lim.MaxToolCalls) {
		r.exceed()
		return limitError("the run reached its limit of %d tool calls (limits.max_tool_calls); loop over fewer elements (filter or slice the list with json_query first) or split the work into several calls", r.lim.MaxToolCalls)
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
		if need, left := len(items)*leafCount(l.Do), r.lim.MaxToolCalls-int(r.toolCalls.Load()); need > left {
			r.exceed()
			fail = limitError("for_each %s would make %d tool calls (%d elements); the run has %d left of its limit of %d (limits.max_tool_calls). Loop over fewer elements or split the work into several calls", l.ID, need, len(items), max(left, 0), r.lim.MaxToolCalls)
		}
	}
	if fail != nil {
		r.end(l, StatusFailed, nil, fail)
		return
	}
	iters := r.expand(l, items)

	limit := r.lim.MaxParallel
	if l.MaxConcurrency > 0 && l.MaxConcurrency < limit {
		limit = l.MaxConcurrency
	}
	var eg errgroup.Group
	eg.SetLimit(limit)
	var settled atomic.Bool // an iteration failed and halts the loop: no new one starts
	stopped := func() bool { return settled.Load() || ctx.Err() != nil || !r.dispatching() }
	for _, it := range iters {
		if stopped() {
			break
		}
		eg.Go(func() error {
			if stopped() {
				return nil
			}
			if why := r.admit(it); why != nil {
				r.skipFor(it, why)
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
	for _, it := range iters {
		r.skip(it, nil)
	}
	r.mergeLoop(l, iters)
}

// expand makes the iterations of loop l, one per element of items, and
// their records under the loop's. The run's count of tool steps grows by
// what the loop adds, so that progress knows its total from now on.
func (r *run) expand(l *Step, items []any) []*Step {
	iters := make([]*Step, len(items))
	for i, item := range items {
		iters[i] = cloneBody(l, &iteration{loop: l, index: i, item: item})
	}
	r.mu.Lock()
	lrec := r.records[l]
	lrec.Children = make([]*StepRecord, len(iters))
	for i, it := range iters {
		rec := r.buildRecord(it)
		rec.Iteration = &iters[i].iter.index
		lrec.Children[i] = rec
	}
	r.mu.Unlock()
	r.info.grow(len(items)*leafCount(l.Do) - leafCount(l.Do))
	return iters
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
// array of their outputs, null where one failed or was skipped. With merge
// "collect" a failed iteration fails the loop (unless its body has
// on_error "continue"); with "all_settled" it makes the loop partial.
func (r *run) mergeLoop(l *Step, iters []*Step) {
	r.mu.Lock()
	out := make([]any, len(iters))
	status := StatusSuccess
	var fail *Error
	for i, it := range iters {
		rec := r.records[it]
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
	r.mu.Unlock()
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
