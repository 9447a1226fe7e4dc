package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Stream policies: which steps of a plan still being written may start.
const (
	// StreamOff starts nothing before the whole plan validated.
	StreamOff = "off"
	// StreamReadOnly starts early only the steps whose tool says it is
	// read-only (MCP annotation readOnlyHint): a plan rejected after they
	// started has changed nothing. The default.
	StreamReadOnly = "read_only"
	// StreamAll starts early any step that may start: a step of a plan
	// that is then rejected may have done its work.
	StreamAll = "all"
)

// StreamPolicies lists the stream policies, the default first.
var StreamPolicies = []string{StreamReadOnly, StreamOff, StreamAll}

// Stream starts the steps of a plan while the planner is still receiving
// it, LLMCompiler's way: a PlanFunc finds it in its context with
// [StreamFrom] and offers it the plan as it grows. A top-level tool step
// starts as soon as the plan written so far validates, the policy allows
// its tool, and the steps it references have finished (their outputs
// resolve its arguments); a parallel group of such tool steps starts all
// its children once complete, when a run would start them all at once.
// Steps with for_each or when, steps that need a group's output, agent
// steps and tools the client runs wait for the whole plan.
//
// The whole plan's validation still decides: when it passes, the run's
// step takes the early call's result (same tool, same resolved
// arguments) instead of calling the tool again; when it fails, the early
// calls are cancelled and reported in the run's errors
// ([CodeStreamRejected]). Early calls the run did not use are cancelled and
// reported when the run ends ([CodeStreamUnused]).
type Stream struct {
	r      *run
	base   context.Context // the early calls'; cancelled when the run ends
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	policy  string
	plan    *Plan                 // the plan written so far
	calls   map[string]*earlyCall // this attempt's, by step path
	started map[int]bool          // top-level steps of this attempt started early
	never   map[int]bool          // top-level steps of this attempt that will not start early
	stopped bool                  // the plan so far is invalid: nothing more starts
	final   bool                  // the plan is the run's: calls are taken, none start
	old     []*earlyCall          // calls of rejected attempts
	reports []*Error              // what came of the calls not used
	rejects map[*earlyCall]error  // the reason each rejected call was cancelled
}

// earlyCall is one tool call started before the plan was complete.
type earlyCall struct {
	index  int    // the top-level step's
	path   string // the step's
	stepID string
	tool   string
	args   []byte // the resolved arguments, JSON
	cancel context.CancelFunc
	done   chan struct{}

	// Set before done closes.
	res      *registry.Result
	err      error
	timedOut bool
	taken    bool // guarded by Stream.mu
}

type streamKey struct{}

// StreamFrom returns the stream of the run whose PlanFunc got ctx, if the
// run can start steps early.
func StreamFrom(ctx context.Context) (*Stream, bool) {
	s, ok := ctx.Value(streamKey{}).(*Stream)
	return s, ok && s != nil
}

// newStream makes the stream of run r, whose early calls run under ctx,
// the caller's context.
func (r *run) newStream(ctx context.Context) *Stream {
	base := toolcontext.WithDepth(context.WithoutCancel(ctx), r.depth+1)
	base = toolcontext.WithExecID(base, r.execID)
	base, cancel := context.WithCancel(base)
	// The caller's cancellation reaches the early calls too.
	stop := context.AfterFunc(ctx, cancel)
	return &Stream{r: r, base: base, cancel: func() { stop(); cancel() }, calls: map[string]*earlyCall{}, started: map[int]bool{}, never: map[int]bool{}}
}

// Offer gives the stream the plan written so far: every step in it
// complete, later steps still to come. Steps of it that may start under
// policy (one of the Stream policies) start now or when the steps they need
// finish. Offer returns at once; a plan that does not validate stops the
// attempt's early starts.
func (s *Stream) Offer(plan *Plan, policy string) {
	if s == nil || plan == nil || policy == StreamOff || policy == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.final {
		return
	}
	tools := s.r.ps.tools
	tmpl := newTemplateCache(plan)
	v := validateCached(plan, tools, s.r.lim, s.r.req.Bindings, s.r.e.opts.Forbidden, tmpl)
	if !v.OK() || len(s.r.ps.issues) > 0 {
		s.stopped = true
		return
	}
	s.plan, s.policy = plan, policy
	s.startReady()
}

// startReady starts the steps of s.plan that may start now. It runs with
// s.mu held.
func (s *Stream) startReady() {
	plan := s.plan
	if plan == nil || s.stopped || s.final {
		return
	}
	// A run of its own, never started, resolves the arguments from the
	// early calls' outputs.
	sh := &run{e: s.r.e, req: s.r.req, lim: s.r.lim, plan: plan, ps: pauseState{tools: s.r.ps.tools}, records: map[*Step]*StepRecord{}, outputs: map[*Step]any{}}
	sh.tmpl = newTemplateCache(plan)
	sh.prepare()
	for i, st := range plan.Steps {
		if s.started[i] || s.never[i] {
			continue
		}
		leaves, tools, ok := s.startable(st)
		if !ok {
			s.never[i] = true
			continue
		}
		ready := true
		for _, d := range sh.deps[st] {
			c := s.calls[d.path]
			if d.IsGroup() || s.never[d.index] {
				// A group's output is merged by the run: what needs it
				// waits for the whole plan.
				s.never[i] = true
				ready = false
				break
			}
			if c == nil {
				ready = false
				break
			}
			select {
			case <-c.done:
			default:
				ready = false
			}
			if !ready {
				break
			}
			if c.err != nil || c.res == nil || c.res.IsError {
				s.never[i] = true // the run reports the failure its own way
				ready = false
				break
			}
			sh.outputs[d] = c.res.Output()
		}
		if !ready {
			continue
		}
		args := make([]map[string]any, len(leaves))
		for k, leaf := range leaves {
			a, fail := sh.resolveArgs(leaf)
			if fail != nil {
				s.never[i] = true
				break
			}
			args[k] = a
		}
		if s.never[i] || s.r.budget.Spend(budget.ToolCalls, int64(len(leaves))) != nil {
			// An early call is one of the request's tool calls, whether
			// a step takes it or not: the early calls of every attempt
			// and the run's own stay within its budget together.
			s.never[i] = true
			continue
		}
		s.started[i] = true
		for k, leaf := range leaves {
			s.start(leaf, tools[k], args[k])
		}
	}
}

// startable returns the tool steps top-level step st starts early, with
// their tools: st itself, or the children of a group whose children all
// start at once in a run (no more than its max_concurrency and the run's
// max_parallel), each a tool step that may start early.
func (s *Stream) startable(st *Step) ([]*Step, []registry.Tool, bool) {
	leaves := []*Step{st}
	if st.IsGroup() {
		limit := s.r.lim.MaxParallel
		if st.MaxConcurrency > 0 {
			limit = min(limit, st.MaxConcurrency)
		}
		if st.When != "" || len(st.Parallel) == 0 || len(st.Parallel) > limit {
			return nil, nil, false
		}
		leaves = st.Parallel
	}
	var tools []registry.Tool
	for _, l := range leaves {
		tool, ok := s.startableLeaf(l)
		if !ok {
			return nil, nil, false
		}
		tools = append(tools, tool)
	}
	return leaves, tools, true
}

// startableLeaf reports whether tool step st may start before the plan
// is complete, and its tool.
func (s *Stream) startableLeaf(st *Step) (registry.Tool, bool) {
	if st.Tool == "" || st.Agent != "" || st.IsGroup() || st.IsLoop() || st.When != "" {
		return registry.Tool{}, false
	}
	tool, ok := s.r.ps.tools.Lookup(st.Tool)
	if !ok || s.r.clientFinal(tool) {
		return registry.Tool{}, false
	}
	if s.policy != StreamAll && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
		return registry.Tool{}, false
	}
	return tool, true
}

// start calls the tool of tool step st with args.
func (s *Stream) start(st *Step, tool registry.Tool, args map[string]any) {
	data, err := json.Marshal(args)
	if err != nil {
		return // the run calls it
	}
	timeout := s.r.lim.StepTimeout
	if st.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(st.TimeoutMS)*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(s.base, timeout)
	c := &earlyCall{index: st.index, path: st.path, stepID: st.ID, tool: st.Tool, args: data, cancel: cancel, done: make(chan struct{})}
	s.calls[st.path] = c
	s.r.e.log.Debug("step started while the plan is written", "exec_id", s.r.execID, "step_id", st.ID, "tool", st.Tool)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res, err := invokeSafely(toolcontext.WithCall(ctx, s.r.callOf(st)), tool, args)
		c.res, c.err = res, err
		c.timedOut = ctx.Err() == context.DeadlineExceeded && s.base.Err() == nil
		cancel()
		s.mu.Lock()
		close(c.done)
		s.startReady() // the steps that waited for this one
		s.mu.Unlock()
	}()
}

// invokeSafely calls tool; a panic is the call's error.
func invokeSafely(ctx context.Context, tool registry.Tool, args map[string]any) (res *registry.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, fmt.Errorf("the tool panicked: %v", v)
		}
	}()
	return tool.Invoke(ctx, &registry.CallRequest{Arguments: args})
}

// Reject tells the stream that the plan of this attempt was rejected:
// why says so. Its early calls are cancelled, and reported when the run
// ends; the next attempt starts afresh.
func (s *Stream) Reject(why string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectLocked(why)
}

func (s *Stream) rejectLocked(why string) {
	for _, c := range sortedCalls(s.calls) {
		c.cancel()
		if s.rejects == nil {
			s.rejects = map[*earlyCall]error{}
		}
		s.rejects[c] = errors.New(why)
		s.old = append(s.old, c)
	}
	clear(s.calls)
	s.plan, s.stopped = nil, false
	clear(s.started)
	clear(s.never)
}

// accept makes plan, validated, the run's: no more early starts, and the
// run's steps take the calls that match them.
func (s *Stream) accept() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.final = true
	s.mu.Unlock()
}

// take returns the early call of tool step st when it called the same
// tool with the same arguments, and marks it used.
func (s *Stream) take(st *Step, args map[string]any) *earlyCall {
	if s == nil || st.iter != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.match(st, args)
	if c != nil {
		c.taken = true
	}
	return c
}

// startedEarly reports whether step st was called with args while the
// plan was written, and no step took the call yet: the call was counted
// as it started.
func (s *Stream) startedEarly(st *Step, args map[string]any) bool {
	if s == nil || st.iter != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.match(st, args) != nil
}

// match returns the early call of step st if it was called with args and
// no step took it; s.mu is held.
func (s *Stream) match(st *Step, args map[string]any) *earlyCall {
	c := s.calls[st.path]
	if !s.final || c == nil || c.taken || c.tool != st.Tool || c.stepID != st.ID {
		return nil
	}
	data, err := json.Marshal(args)
	if err != nil || string(data) != string(c.args) {
		return nil
	}
	return c
}

// wait returns the early call's result, cancelling it if ctx ends first.
func (c *earlyCall) wait(ctx context.Context) (*registry.Result, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		c.cancel()
		<-c.done
	}
	return c.res, c.err
}

// close ends the stream when its run ends: the calls no step took are
// cancelled and waited for, and what came of them is returned.
func (s *Stream) close() []*Error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.final = true
	for _, c := range s.calls {
		if !c.taken {
			c.cancel()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Error
	for _, c := range s.old {
		out = append(out, &Error{StepID: c.stepID, Code: CodeStreamRejected, Message: fmt.Sprintf(
			"%s started while the plan was being written; %s, so it was cancelled and its result discarded (%s)", c.describe(), s.rejects[c], c.outcome())})
	}
	for _, c := range sortedCalls(s.calls) {
		if c.taken {
			continue
		}
		out = append(out, &Error{StepID: c.stepID, Code: CodeStreamUnused, Message: fmt.Sprintf(
			"%s started while the plan was being written, but the run did not use it; it was cancelled and its result discarded (%s)", c.describe(), c.outcome())})
	}
	return out
}

func (c *earlyCall) describe() string {
	return fmt.Sprintf("step %s (tool %s)", c.stepID, c.tool)
}

// outcome says how far the call got: it may have done its work.
func (c *earlyCall) outcome() string {
	switch {
	case c.err == nil && c.res != nil && !c.res.IsError:
		return "the call had completed"
	case c.err != nil && (errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)):
		return "the call was stopped before it answered"
	default:
		return "the call had failed"
	}
}

// sortedCalls returns calls in plan order.
func sortedCalls(calls map[string]*earlyCall) []*earlyCall {
	out := slices.Collect(maps.Values(calls))
	slices.SortFunc(out, func(a, b *earlyCall) int {
		if a.index != b.index {
			return a.index - b.index
		}
		return strings.Compare(a.path, b.path)
	})
	return out
}

// endStream ends the run's stream, adding to the run's errors what came
// of the early calls no step used.
func (r *run) endStream() {
	if errs := r.stream.close(); len(errs) > 0 {
		r.mu.Lock()
		r.errors = append(r.errors, errs...)
		r.mu.Unlock()
	}
}
