package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

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
	if r.waitAgain(s) {
		return
	}
	// A call started while the plan was written was counted as it
	// started; any other is counted now.
	if !r.stream.startedEarly(s, args) {
		if fail := r.countCall(); fail != nil {
			r.end(s, StatusFailed, nil, fail)
			return
		}
	}
	tool, ok := r.ps.tools.Lookup(s.Tool)
	if !ok {
		r.end(s, StatusFailed, nil, &Error{Code: CodeServerUnavailable, Message: fmt.Sprintf("tool %q is no longer available (its server may have stopped); retry later", s.Tool)})
		return
	}
	if r.clientFinal(tool) {
		r.clientCall(ctx, s, tool, args)
		return
	}
	if err := r.sem.Acquire(ctx, 1); err != nil {
		r.end(s, ctxStatus(ctx), nil, r.ctxError(ctx, nil))
		return
	}
	defer r.sem.Release(1)
	r.call(ctx, s, tool, args, r.stream.take(s, args))
}

// call calls the tool of s with args, retrying transient failures, and
// ends s with what came of it. It is a function of its own so that its
// large frame is not on the stack while the arguments resolve, which keeps
// a step's goroutine within its first stack.
//
// early, when set, is the call of s started while the plan was being
// written (stream.go): its result is the first attempt's.
func (r *run) call(ctx context.Context, s *Step, tool registry.Tool, args map[string]any, early *earlyCall) {
	timeout := r.stepTimeout(s)
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
	ctx = r.stepContext(toolcontext.WithCall(ctx, r.callOf(s)), s)
	for attempt := 1; ; attempt++ {
		r.mu.Lock()
		r.records[s].Attempts = attempt
		r.mu.Unlock()
		actx, cancel := context.WithTimeout(ctx, timeout)
		var res *registry.Result
		var err error
		var stepTimedOut bool
		if attempt == 1 && early != nil {
			res, err = early.wait(actx)
			stepTimedOut = (early.timedOut || actx.Err() == context.DeadlineExceeded) && ctx.Err() == nil
		} else {
			cr := &registry.CallRequest{Arguments: args, Progress: progress}
			if attempt == 1 {
				cr.Continue = r.ps.continues[s.ID] // a resume takes up the step's paused loop
			}
			res, err = tool.Invoke(actx, cr)
			stepTimedOut = actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		}
		cancel()
		if err == nil && res.Handoff != nil {
			r.handoff(s, res.Handoff)
			return
		}
		if err == nil && !res.IsError {
			out := plainJSON(res.Output())
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
			if res.Partial {
				// An incomplete answer (an agent's partial): the output is
				// kept and the plan goes on; the step and the plan are
				// partial.
				code := Code(res.Code)
				if code == "" {
					code = CodeToolError
				}
				why, _, _ := strings.Cut(strings.TrimSpace(res.Text()), "\n\n")
				r.end(s, StatusPartial, out, &Error{Code: code, Message: toolErrorMessage(why, true)})
				return
			}
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
			if res.Code != "" {
				fail.Code = Code(res.Code)
			}
			failedOutput = plainJSON(res.Structured)
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

// stepTimeout is how long one attempt of step s may take: its timeout_ms,
// at most limits.step_timeout. Every wait of the step is under it: the
// tool's answer, the user's (ask_user through elicitation).
func (r *run) stepTimeout(s *Step) time.Duration {
	timeout := r.lim.StepTimeout
	if s.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(s.TimeoutMS)*time.Millisecond)
	}
	return timeout
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

// progressFunc returns the callback through which the tool of s reports
// progress, or nil when no hook reads it. A report that comes after the
// step ended is dropped.
func (r *run) progressFunc(s *Step) func(registry.Progress) {
	h := r.hooks.StepProgress
	if h == nil {
		return nil
	}
	return func(p registry.Progress) {
		r.mu.Lock()
		rec := r.records[s]
		if rec.ended {
			r.mu.Unlock()
			return
		}
		cp := copyRecord(rec)
		r.mu.Unlock()
		callHook(r, "StepProgress", h, StepProgressInfo{Run: r.info, At: time.Now(), Step: cp, Progress: p})
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

// callOf names the call of step s for its tool: this run and the step,
// or, for the one-step run of a tool loop's call, that loop's run and call.
func (r *run) callOf(s *Step) toolcontext.Call {
	if r.req.loop != nil {
		return *r.req.loop
	}
	return toolcontext.Call{ExecID: r.execID, StepID: s.ID, Auto: r.req.Prompt != ""}
}
