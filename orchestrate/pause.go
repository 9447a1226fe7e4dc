package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// Pausing. A tool only the client can run (a client tool declared in the
// request, a tool the configuration marks client-final, ask_user when the
// caller asks its user on a pause or the plan lets the calling model
// answer) is not called: its step waits, with its arguments resolved,
// while every other step that can run does. When nothing more can run, the
// run pauses (state awaiting_client): its answer lists the pending calls,
// and the run is kept (PauseStore) until a resume brings their results or
// it expires. A resume replays the plan: the steps that ended keep their
// outputs and are not run again (resume.go).

// StatusAwaitingClient is the status of a paused run, and of its steps that
// wait for the client.
const StatusAwaitingClient = "awaiting_client"

// AskUserTool is the name of the built-in tool that asks the user.
const AskUserTool = "ask_user"

// IfNoUserPause is the value of ask_user's if_no_user that pauses the run
// for the calling model to answer when no user can be asked; the default,
// "fail", fails the question with user_unavailable.
const IfNoUserPause = "pause"

// ClientTool is a tool the caller runs itself, declared in the request's
// client_tools. Plans call it by name like any tool.
type ClientTool struct {
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	InputSchema  map[string]any `json:"input_schema,omitempty"`
	OutputSchema map[string]any `json:"output_schema,omitempty"`
}

// ResumeRequest continues a run: a paused one with the results of its
// pending calls, an interrupted or failed one without.
type ResumeRequest struct {
	ExecID string `json:"exec_id"`
	// Results are the outputs of pending calls, by step id (or call id);
	// {"error": "message"} reports that the call failed.
	Results map[string]any `json:"results,omitempty"`
}

// PendingCall is a call of a client tool the run waits for.
type PendingCall struct {
	// CallID names this call; a result for a call that is no longer
	// pending is refused.
	CallID string `json:"call_id"`
	Step   string `json:"step"`
	// Agent, for a call of an agent's tool loop (or of another tool that
	// runs one), names the tool of Step that made it: the loop waits for
	// it, and goes on with its result.
	Agent     string         `json:"agent,omitempty"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

// LoopPause is the paused tool loop of a step (an agent's), kept with the
// run's pause: the loop's state, and which of its calls each pending call
// is.
type LoopPause struct {
	// State is the loop's state (registry.Handoff.State).
	State json.RawMessage `json:"state"`
	// Calls maps the ids of the step's pending calls to the loop's ids of
	// them.
	Calls map[string]string `json:"calls"`
}

// ResumeHint says how to continue a paused run.
type ResumeHint struct {
	ExecID    string `json:"exec_id"`
	ExpiresAt string `json:"expires_at,omitempty"`
	// How is the request that continues the run.
	How string `json:"how"`
}

// Elicit asks the user of the calling client a question (MCP
// elicitation): message, and schema, when set, the form of the answer. It
// returns the action (accept, decline or cancel) and the content.
type Elicit func(ctx context.Context, message string, schema map[string]any) (action string, content map[string]any, err error)

// pauseState is what a run knows about pausing and resuming.
type pauseState struct {
	tools      Tools                  // the catalog, with the request's client tools
	issues     []*Issue               // the problems of the client tools' declarations
	elicit     Elicit                 // asks the user during the run; nil: no user can be asked so
	askOnPause bool                   // the caller asks its user when the run pauses for ask_user
	results    map[string]any         // a resume's results, by step id
	callIDs    map[string]string      // the call ids of steps still pending, by step id
	reuse      map[string]*StepRecord // the records of steps that ended before a resume, by id
	resumed    bool                   // the run was taken up again: no RunStarted
	pending    []*PendingCall         // guarded by run.mu
	// loops are the tool loops of steps that paused this run, by step id
	// (guarded by run.mu); continues are those a resume takes up, with
	// the client's results.
	loops     map[string]*LoopPause
	continues map[string]*registry.Continuation
	// held are the paused loops a resume brought no results for, with
	// their pending calls, by step id: they wait again as they were.
	held        map[string]*LoopPause
	heldPending map[string][]*PendingCall
}

// waitAgain makes step s wait for the client again when its tool loop
// paused before and the resume brought none of its results: same calls,
// same call ids, same state; the loop does not run again.
func (r *run) waitAgain(s *Step) bool {
	lp, ok := r.ps.held[s.ID]
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ps.pending = append(r.ps.pending, r.ps.heldPending[s.ID]...)
	if r.ps.loops == nil {
		r.ps.loops = map[string]*LoopPause{}
	}
	r.ps.loops[s.ID] = lp
	r.records[s].Status = StatusAwaitingClient
	return true
}

// handoff makes step s, whose tool's loop asked for client-final calls,
// wait for the client: one pending call each, and the loop's state kept
// with the pause, counted against the run's bytes like an output. In a
// run that cannot pause (a tool loop's call) the step fails.
func (r *run) handoff(s *Step, h *registry.Handoff) {
	if r.req.NoPause {
		r.end(s, StatusFailed, nil, &Error{Code: CodeClientInLoop, Message: fmt.Sprintf("%s waits for the client to run %s, and a tool loop cannot pause for it; call %s from a plan step instead", s.Tool, strings.Join(h.Tools(), ", "), s.Tool)})
		return
	}
	if fail := r.bytes.charge(s.ID, int64(len(h.State))); fail != nil {
		r.end(s, StatusFailed, nil, fail)
		return
	}
	pending, lp := r.e.loopPending(s.ID, s.Tool, h)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ps.pending = append(r.ps.pending, pending...)
	if r.ps.loops == nil {
		r.ps.loops = map[string]*LoopPause{}
	}
	r.ps.loops[s.ID] = lp
	r.records[s].Status = StatusAwaitingClient
}

// clientCall handles step s, whose tool only the client can finish: with
// a resume's result it ends with it; ask_user asks through elicitation
// when the client has it; otherwise the step waits for the client.
func (r *run) clientCall(ctx context.Context, s *Step, tool registry.Tool, args map[string]any) {
	if v, ok := r.ps.results[s.ID]; ok {
		if msg, failed := ClientFailure(v); failed {
			r.end(s, StatusFailed, nil, &Error{Code: CodeClientError, Message: msg})
			return
		}
		if tool.Name == AskUserTool {
			r.askAnswered(s, v)
			return
		}
		r.end(s, StatusSuccess, v, nil)
		return
	}
	if tool.Name == AskUserTool {
		switch {
		case r.ps.elicit != nil:
			r.ask(ctx, s, args)
			return
		case !r.askPauses(s.Arguments): // as written, as the plan-time checks read it
			r.end(s, StatusFailed, nil, &Error{Code: CodeUserUnavailable, Message: "no user can be asked this question: the client has no MCP elicitation (and a command line run has no client), " +
				"so the step fails and what depends on the answer does not run. If the calling model may answer instead, add \"if_no_user\": \"pause\" to ask_user's arguments: " +
				"the run then pauses and is resumed with its answer, which is not the user's decision"})
			return
		}
	}
	id := r.ps.callIDs[s.ID]
	if id == "" {
		id = r.e.opts.NewID()
	}
	r.mu.Lock()
	rec := r.records[s]
	rec.Status = StatusAwaitingClient
	r.ps.pending = append(r.ps.pending, &PendingCall{CallID: id, Step: s.ID, Tool: s.Tool, Arguments: args})
	r.mu.Unlock()
}

// ClientFailure reports whether a client's result is {"error": "..."},
// a failed call, and its message.
func ClientFailure(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	msg, ok := m["error"].(string)
	return msg, ok
}

// ask runs ask_user through elicitation, within the step's timeout: a
// user who does not answer fails the step with timeout, and the run's
// slot and the caller's share of the server are not held any longer.
func (r *run) ask(ctx context.Context, s *Step, args map[string]any) {
	msg, _ := args["message"].(string)
	schema, _ := args["schema"].(map[string]any)
	timeout := r.stepTimeout(s)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	action, content, err := r.ps.elicit(actx, msg, schema)
	if err != nil {
		if ctx.Err() != nil {
			r.end(s, ctxStatus(ctx), nil, r.ctxError(ctx, err))
			return
		}
		if actx.Err() != nil {
			r.end(s, StatusFailed, nil, &Error{Code: CodeTimeout, Message: fmt.Sprintf("the user did not answer within %s; raise the step's timeout_ms (at most limits.step_timeout)", timeout)})
			return
		}
		r.end(s, StatusFailed, nil, &Error{Code: CodeToolError, Message: "asking the user: " + err.Error()})
		return
	}
	out := map[string]any{"action": action, "content": content}
	if content == nil {
		out["content"] = map[string]any{}
	}
	r.askAnswered(s, out)
}

// askAnswered ends an ask_user step with the user's answer: accept
// succeeds, decline and cancel fail with declined.
func (r *run) askAnswered(s *Step, out any) {
	m, _ := out.(map[string]any)
	action, _ := m["action"].(string)
	if action != "accept" {
		r.mu.Lock()
		r.records[s].Output = out
		r.mu.Unlock()
		r.end(s, StatusFailed, nil, &Error{Code: CodeDeclined, Message: fmt.Sprintf("the user answered %q", action)})
		return
	}
	r.end(s, StatusSuccess, out, nil)
}

// waits reports whether step s (a tool step or a group) waits for the
// client.
func (r *run) waits(s *Step) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records[s].Status == StatusAwaitingClient
}

// paused reports whether calls wait for the client.
func (r *run) paused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ps.pending) > 0
}

// abandon ends step s, which waited for the client, as cancelled: the run
// stops (a halt, a timeout) or its group settled without it.
func (r *run) abandon(s *Step) {
	for _, c := range s.Parallel {
		r.abandon(c)
	}
	r.mu.Lock()
	rec := r.records[s]
	if rec.ended {
		r.mu.Unlock()
		return
	}
	waited := rec.Status == StatusAwaitingClient
	if waited {
		rec.Status = StatusCancelled
		rec.Error = &Error{StepID: s.ID, Code: CodeCancelled, Message: "not needed any more: the run or its group stopped while the call waited for the client"}
		r.ps.pending = slices.DeleteFunc(r.ps.pending, func(p *PendingCall) bool { return p.Step == s.ID })
	}
	r.mu.Unlock()
	if waited {
		r.stepEnded(s, fsm.EventStepFinished)
		return
	}
	r.skip(s, nil)
}

// pause ends this part of a paused run: the run is kept until a resume or
// until it expires, and its answer lists the pending calls.
func (r *run) pause() *Envelope {
	defer r.bytes.releaseAll(r.answer)
	r.endStream()
	r.mu.Lock()
	pending := slices.Clone(r.ps.pending)
	loops := maps.Clone(r.ps.loops)
	r.mu.Unlock()
	slices.SortFunc(pending, func(a, b *PendingCall) int { return r.order(a.Step) - r.order(b.Step) })
	expires := time.Now().Add(r.e.lim.PauseTTL)
	req := r.checkpointRequest()
	if err := r.e.pauses.Pause(r.fireCtx, r.execID, req, pending, loops, expires); err != nil {
		// A pause that cannot be kept cannot be resumed: the run fails.
		r.e.log.Error("keeping a paused run", "exec_id", r.execID, "err", err)
		r.addError(&Error{Code: CodePauseExpired, Message: "the paused run could not be kept, so it cannot be resumed: " + err.Error()})
		r.fire(fsm.EventTimeout)
		for _, s := range r.plan.Steps {
			r.abandon(s)
		}
		return r.finish()
	}
	if mp, ok := r.e.pauses.(*memoryPauses); ok {
		mp.keepSteps(r.execID, r.endedSteps())
	}
	env := r.snapshot().envelope()
	a := env.Artifact
	a.Status, a.Success = StatusAwaitingClient, false
	a.Pending = pending
	a.Resume = resumeHint(r.execID, expires, "<step>")
	callHook(r, "RunPaused", r.hooks.RunPaused, RunPausedInfo{Run: r.info, At: time.Now(), Envelope: env})
	r.m.Release()
	return env
}

// resumeHint says how to resume the paused run execID, kept until
// expires: with the client's results by key ("<step>" for a plan's steps,
// "<call_id>" for a loop's calls).
func resumeHint(execID string, expires time.Time, key string) *ResumeHint {
	return &ResumeHint{
		ExecID:    execID,
		ExpiresAt: expires.UTC().Format(time.RFC3339),
		How:       `call agent_orchestrate with {"resume": {"exec_id": "` + execID + `", "results": {"` + key + `": <output> | {"error": "..."}}}}`,
	}
}

// order returns the place of step id in the plan, for sorting.
func (r *run) order(id string) int {
	for i, s := range r.plan.All() {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// checkpointRequest is the request a resume of this run goes on with.
func (r *run) checkpointRequest() *Request {
	return &Request{Plan: r.plan, Bindings: r.req.Bindings, TimeoutMS: r.req.TimeoutMS, MaxParallel: r.req.MaxParallel, ClientTools: r.req.ClientTools}
}

// endedSteps returns copies of the records of the tool steps that ended.
func (r *run) endedSteps() map[string]*StepRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*StepRecord{}
	for s, rec := range r.records {
		if !s.IsGroup() && rec.ended {
			out[s.ID] = copyRecord(rec)
		}
	}
	return out
}

// validateResult checks a client's result against the output schema of
// its tool.
func validateResult(tool registry.Tool, v any) error {
	if _, failed := ClientFailure(v); failed || tool.OutputSchema == nil {
		return nil
	}
	if _, err := schemas.Resolve(tool.OutputSchema); err != nil {
		return nil // a schema that does not resolve cannot be checked
	}
	if err := schemas.ValidateValue(tool.OutputSchema, v); err != nil {
		return errors.New(schemas.CleanError(err))
	}
	return nil
}

// pausedSummary is the summary line of a paused run.
func pausedSummary(a *Artifact, succeeded, leaves int) string {
	calls := make([]string, 0, len(a.Pending))
	for _, p := range a.Pending {
		calls = append(calls, p.Step+" ("+p.Tool+")")
	}
	id := ""
	if a.Resume != nil {
		id = a.Resume.ExecID
	}
	return fmt.Sprintf("Plan paused: %d of %d tool steps succeeded; it waits for the client to run %s. Resume with {\"resume\": {\"exec_id\": %q, \"results\": {\"<step>\": <output>}}}.",
		succeeded, leaves, joinAnd(calls), id)
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return "nothing"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// clientFinal reports whether the client finishes tool t: a client tool,
// a tool marked client-final, ask_user.
func (r *run) clientFinal(t registry.Tool) bool { return r.e.ClientFinal(t) }

// mayPause reports whether step s, a tool step, may wait for the client:
// its tool is client-final, and, when it is ask_user, asking pauses.
func (r *run) mayPause(s *Step) bool {
	t, ok := r.ps.tools.Lookup(s.Tool)
	return ok && r.clientFinal(t) && (t.Name != AskUserTool || r.askPauses(s.Arguments))
}

// askPauses reports whether ask_user with args pauses the run: when the
// caller asks its user on a pause, or when no user can be asked and args
// let the calling model answer (if_no_user: pause, written as such: a
// template there does not pause).
func (r *run) askPauses(args map[string]any) bool {
	if r.ps.elicit != nil {
		return false
	}
	return r.ps.askOnPause || args["if_no_user"] == IfNoUserPause
}

// clientInLoop returns the issue of tool step s when it may pause but runs
// where nothing can wait for the client (a tool loop, a loop's
// iteration), nil otherwise.
func (r *run) clientInLoop(s *Step, where string) *Issue {
	if s.IsGroup() || !r.mayPause(s) {
		return nil
	}
	idx := s.index
	return &Issue{Step: &idx, StepID: s.ID, Path: s.path, Code: CodeClientInLoop,
		Message: fmt.Sprintf("%s is run by the client, and %s cannot pause for it; call it from a top-level plan step instead", s.Tool, where)}
}

// noPauseIssues refuses the steps of a plan that must not pause.
func (r *run) noPauseIssues() []*Issue {
	var out []*Issue
	for _, s := range r.plan.Leaves() {
		if is := r.clientInLoop(s, "a tool loop"); is != nil {
			out = append(out, is)
		}
	}
	return out
}

// loopIssues refuses the tool steps of loop bodies that may pause: a
// loop's iterations cannot wait for the client.
func (r *run) loopIssues() []*Issue {
	var out []*Issue
	var body func(s *Step)
	body = func(s *Step) {
		if s.IsGroup() || s.IsLoop() {
			for _, c := range s.children() {
				body(c)
			}
			return
		}
		if is := r.clientInLoop(s, "a for_each loop's iteration"); is != nil {
			out = append(out, is)
		}
	}
	for _, s := range r.plan.All() {
		if s.IsLoop() && (s.parent == nil || !inLoop(s)) {
			body(s.Do)
		}
	}
	return out
}

// inLoop reports whether s is in the body of a loop.
func inLoop(s *Step) bool {
	for p := s.parent; p != nil; p = p.parent {
		if p.IsLoop() {
			return true
		}
	}
	return false
}
