package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
)

// Resume continues a run (the request's resume): a paused run with the
// results of its pending calls, an interrupted or failed run without. The
// run goes on under its own exec id, with its plan, bindings and the
// outputs of the steps that ended: those steps are not run again. A resume
// that cannot go on (an unknown run, a result of the wrong shape, a run
// another resume took) runs nothing and leaves the run as it was; a paused
// run whose pause expired fails with pause_expired.
func (e *Engine) Resume(ctx context.Context, req *Request) *Envelope {
	rs := req.Resume
	if rs == nil || rs.ExecID == "" {
		return e.refuse(ctx, "resume.exec_id", CodeInvalidRequest, `resume needs the exec_id of the run: {"resume": {"exec_id": "...", "results": {...}}}`, "")
	}
	cp, err := e.pauses.Load(ctx, rs.ExecID)
	if errors.Is(err, ErrNoCheckpoint) {
		return e.refuse(ctx, "resume.exec_id", CodeUnknownRun, fmt.Sprintf("there is no run %s to resume (orchestra executions lists the runs and which can be resumed)", rs.ExecID), "")
	}
	if err != nil {
		return e.refuse(ctx, "resume.exec_id", CodeUnknownRun, fmt.Sprintf("reading run %s: %v", rs.ExecID, err), "")
	}
	var results map[string]any
	var continues map[string]*registry.Continuation
	switch cp.Status {
	case CheckpointPaused:
		if time.Now().After(cp.ExpiresAt) {
			return e.expire(ctx, cp, req.Response)
		}
		var issues []*Issue
		results, continues, issues = e.checkResults(cp, rs.Results)
		if len(issues) > 0 {
			return e.refuseAll(ctx, issues, cp.ExecID)
		}
	case CheckpointInterrupted, CheckpointFailed, CheckpointCancelled:
		if len(rs.Results) > 0 {
			return e.refuse(ctx, "resume.results", CodeInvalidRequest, fmt.Sprintf("run %s is %s and waits for no results; resume it without results to run the steps that did not succeed", cp.ExecID, cp.Status), "")
		}
	default:
		return e.refuse(ctx, "resume.exec_id", CodeNotResumable, fmt.Sprintf("run %s is %s; only paused, interrupted, failed and cancelled runs can be resumed", cp.ExecID, cp.Status), "")
	}
	if _, ok := cp.Loops[FallbackStep]; ok && cp.Request.Plan == nil && (e.fallback == nil || e.fallback.Resume == nil) {
		return e.refuse(ctx, "resume.exec_id", CodeNotResumable, fmt.Sprintf("run %s paused in its planner's reactive fallback, and no planner model is configured here to go on with it; configure the planner block and resume again (the run stays paused)", cp.ExecID), "")
	}
	steps := slices.Sorted(maps.Keys(results))
	for id := range continues {
		steps = append(steps, id)
	}
	slices.Sort(steps)
	if err := e.pauses.Claim(ctx, cp, "resumed", steps); err != nil {
		if errors.Is(err, ErrClaimed) {
			return e.refuse(ctx, "resume.exec_id", CodeAlreadyResumed, fmt.Sprintf("run %s was resumed by another request; read orchestra://executions/%s for what came of it", cp.ExecID, cp.ExecID), "")
		}
		return e.refuse(ctx, "resume.exec_id", CodeUnknownRun, fmt.Sprintf("taking up run %s: %v", cp.ExecID, err), "")
	}
	r := e.resumedRun(ctx, cp, req.Response)
	r.ps.results, r.ps.continues = results, continues
	for step, lp := range cp.Loops {
		if _, goes := continues[step]; goes {
			continue
		}
		if r.ps.held == nil {
			r.ps.held, r.ps.heldPending = map[string]*LoopPause{}, map[string][]*PendingCall{}
		}
		r.ps.held[step] = lp
		for _, p := range cp.Pending {
			if p.Step == step {
				r.ps.heldPending[step] = append(r.ps.heldPending[step], p)
			}
		}
	}
	callHook(r, "RunResumed", r.hooks.RunResumed, RunResumedInfo{Run: r.info, At: r.started})
	if cont, ok := continues[FallbackStep]; ok && cp.Request.Plan == nil {
		return r.resumeFallback(ctx, cont)
	}
	return r.run(ctx, nil)
}

// refuse answers a resume that cannot go on; a run still paused is named
// in artifact.resume.
func (e *Engine) refuse(ctx context.Context, path string, code Code, msg, paused string) *Envelope {
	return e.refuseAll(ctx, []*Issue{{Path: path, Code: code, Message: msg}}, paused)
}

func (e *Engine) refuseAll(ctx context.Context, issues []*Issue, paused string) *Envelope {
	env := e.Reject(ctx, issues)
	if paused != "" {
		env.Artifact.Resume = &ResumeHint{ExecID: paused, How: "the run is still paused: resume it again with results that match"}
	}
	return env
}

// checkResults matches a resume's results with the pending calls of a
// paused run, by step id or call id, and checks each against its tool's
// output schema. It returns the results of client steps by step id, and
// the continuations of the steps whose tool loops paused, by step id: a
// loop goes on only with the results of all its calls.
func (e *Engine) checkResults(cp *Checkpoint, given map[string]any) (map[string]any, map[string]*registry.Continuation, []*Issue) {
	waiting := make([]string, 0, len(cp.Pending))
	for _, p := range cp.Pending {
		waiting = append(waiting, fmt.Sprintf("%s (%s, call %s)", p.Step, p.Tool, p.CallID))
	}
	if len(given) == 0 {
		return nil, nil, []*Issue{{Path: "resume.results", Code: CodeInvalidResult, Message: fmt.Sprintf("run %s waits for the results of %s; send them in resume.results by step id", cp.ExecID, strings.Join(waiting, ", "))}}
	}
	tools, _ := withClientTools(e.opts.Tools, cp.Request.ClientTools)
	calls := map[string]int{} // the pending calls of each step
	for _, p := range cp.Pending {
		calls[p.Step]++
	}
	out := map[string]any{}
	continues := map[string]*registry.Continuation{}
	var issues []*Issue
	more := 0 // issues past MaxIssues, counted and not described
	for _, key := range sortedKeys(given) {
		v := given[key]
		// A call id first: a step of a tool loop may wait for several.
		i := slices.IndexFunc(cp.Pending, func(p *PendingCall) bool { return p.CallID == key })
		if i < 0 {
			i = slices.IndexFunc(cp.Pending, func(p *PendingCall) bool { return p.Step == key })
		}
		if i < 0 && len(issues) >= MaxIssues {
			more++
			continue
		}
		if i < 0 {
			issues = append(issues, &Issue{Path: "resume.results." + key, Code: CodeInvalidResult, Message: fmt.Sprintf("%q names no call the run waits for (a call answered before, or no client call at all); it waits for %s", key, strings.Join(waiting, ", "))})
			continue
		}
		p := cp.Pending[i]
		_, looped := cp.Loops[p.Step]
		if (p.Agent != "" || looped) && key == p.Step && calls[p.Step] > 1 {
			owner := p.Agent
			if owner == "" {
				owner = "the planner's fallback"
			}
			issues = append(issues, &Issue{Path: "resume.results." + key, StepID: p.Step, Code: CodeInvalidResult, Message: fmt.Sprintf("step %s waits for %d calls of %s's tool loop; send each result by its call id", p.Step, calls[p.Step], owner)})
			continue
		}
		if tool, ok := tools.Lookup(p.Tool); ok {
			if err := validateResult(tool, v); err != nil {
				issues = append(issues, &Issue{Path: "resume.results." + key, StepID: p.Step, Code: CodeInvalidResult, Message: fmt.Sprintf("the result of %s does not match the output schema of %s: %v; the run stays paused", p.Step, p.Tool, err)})
				continue
			}
		}
		if p.Agent == "" && !looped {
			out[p.Step] = v
			continue
		}
		lp := cp.Loops[p.Step]
		if lp == nil || lp.Calls[p.CallID] == "" {
			issues = append(issues, &Issue{Path: "resume.results." + key, StepID: p.Step, Code: CodeNotResumable, Message: fmt.Sprintf("the tool loop of step %s was not kept with the pause, so it cannot go on; start the run again", p.Step)})
			continue
		}
		c := continues[p.Step]
		if c == nil {
			c = &registry.Continuation{State: lp.State, Results: map[string]any{}}
			continues[p.Step] = c
		}
		c.Results[lp.Calls[p.CallID]] = v
	}
	for step, c := range continues {
		if len(c.Results) < calls[step] {
			var missing []string
			for _, p := range cp.Pending {
				if lp := cp.Loops[step]; p.Step == step && lp != nil {
					if _, ok := c.Results[lp.Calls[p.CallID]]; !ok {
						missing = append(missing, fmt.Sprintf("%s (%s)", p.CallID, p.Tool))
					}
				}
			}
			issues = append(issues, &Issue{Path: "resume.results", StepID: step, Code: CodeInvalidResult, Message: fmt.Sprintf("the tool loop of step %s goes on only with the results of all its calls; send those of %s too (the run stays paused)", step, strings.Join(missing, ", "))})
		}
	}
	if more > 0 {
		issues = append(issues, &Issue{Path: "resume.results", Code: CodeTooManyIssues, Message: fmt.Sprintf("%d more results name no call the run waits for; send only the results of %s", more, strings.Join(waiting, ", "))})
	}
	return out, continues, issues
}

// resumedRun makes the run that takes up cp: its exec id, its request,
// the records of its steps that ended, and the call ids of its pending
// calls. response is the resume's own "response": the shape of its answer.
func (e *Engine) resumedRun(ctx context.Context, cp *Checkpoint, response string) *run {
	req := *cp.Request
	req.Response = response
	r := e.newRun(ctx, &req)
	r.execID, r.info.ExecID = cp.ExecID, cp.ExecID
	if e.opts.Record != nil {
		r.recordURI = e.opts.Record(cp.ExecID)
	}
	r.ps.resumed = true
	r.ps.reuse = map[string]*StepRecord{}
	for id, rec := range cp.Steps {
		// A paused run keeps every step that ended; an interrupted or
		// failed one only those that succeeded.
		if cp.Status == CheckpointPaused || rec.Status == StatusSuccess {
			r.ps.reuse[id] = rec
		}
	}
	r.ps.callIDs = map[string]string{}
	for _, p := range cp.Pending {
		r.ps.callIDs[p.Step] = p.CallID
	}
	if cp.Status == CheckpointPaused {
		r.m.Release()
		if e.transition != nil {
			r.m = fsm.NewPaused(e.transition)
		} else {
			r.m = fsm.NewPaused()
		}
	}
	return r
}

// restore puts the records of the steps that ended before a resume in
// place: they end as they did, without running or being reported again.
func (r *run) restore() {
	if len(r.ps.reuse) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.plan.Leaves() {
		old, ok := r.ps.reuse[s.ID]
		if !ok || old.Tool != s.Tool || inLoop(s) { // a loop runs again in full
			continue
		}
		rec := r.records[s]
		rec.Status, rec.Output, rec.Error, rec.Attempts = old.Status, old.Output, old.Error, old.Attempts
		rec.StartedAt, rec.DurationMS, rec.ExecID, rec.Arguments, rec.SkillID = old.StartedAt, old.DurationMS, old.ExecID, old.Arguments, old.SkillID
		rec.ended = true
		if rec.Status == StatusSuccess || rec.Status == StatusPartial {
			r.outputs[s] = rec.Output
		}
	}
}

// startEvent is the event that starts dispatching a validated plan: a
// paused run taken up again resumes.
func (r *run) startEvent() string {
	if r.m.Current() == fsm.StateAwaitingClient {
		return fsm.EventResume
	}
	return fsm.EventValidated
}

// expire ends a paused run whose pause expired: it fails with
// pause_expired, its pending calls cancelled.
func (e *Engine) expire(ctx context.Context, cp *Checkpoint, response string) *Envelope {
	if err := e.pauses.Claim(ctx, cp, "expired", nil); err != nil {
		return e.refuse(ctx, "resume.exec_id", CodeAlreadyResumed, fmt.Sprintf("run %s was taken up by another request; read orchestra://executions/%s", cp.ExecID, cp.ExecID), "")
	}
	r := e.resumedRun(ctx, cp, response)
	callHook(r, "RunResumed", r.hooks.RunResumed, RunResumedInfo{Run: r.info, At: r.started})
	r.plan = cp.Request.Plan
	r.info.Plan, r.info.Leaves = r.plan, len(r.plan.Leaves())
	r.validate()
	r.prepare()
	r.restore()
	r.mu.Lock()
	for _, s := range r.plan.Leaves() {
		if _, ok := r.ps.callIDs[s.ID]; ok {
			r.records[s].Status = StatusAwaitingClient
		}
	}
	r.mu.Unlock()
	r.stop()
	r.addError(&Error{Code: CodePauseExpired, Message: fmt.Sprintf("run %s waited for the client's results until %s (limits.pause_ttl is %s) and expired; start it again", cp.ExecID, cp.ExpiresAt.UTC().Format(time.RFC3339), e.lim.PauseTTL)})
	r.fire(fsm.EventTimeout)
	for _, s := range r.plan.Steps {
		r.abandon(s)
	}
	return r.finish()
}
