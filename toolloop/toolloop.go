package toolloop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// FinalPrompt is what the model is told on its last turn, when it has
// called tools before.
const FinalPrompt = "No more tool calls are allowed: answer now from the results so far."

// Loop is one bounded tool loop. Its zero fields take the defaults; Generate
// and Call are required when tools are offered.
type Loop struct {
	// Generate makes one model call. It draws the call from the budget
	// its context carries (toolcontext.BudgetFrom); a *budget.Exceeded
	// it returns ends the loop with CodeLimitExceeded.
	Generate func(ctx context.Context, req *llm.Request) (*llm.Response, error)
	// System is the system prompt of every call.
	System string
	// Tools are the tools offered to the model.
	Tools []llm.ToolDef
	// MaxTurns is how many model turns may call tools; one more turn, with
	// tools forbidden, asks for the answer.
	MaxTurns int
	// MaxCalls caps the tool calls of the whole loop; 0 means no cap. Calls
	// beyond it are not run and the model is told so.
	MaxCalls int
	// Call runs one tool call and returns what the model is told of it.
	Call func(ctx context.Context, tc llm.ToolCall) string
	// Turn, when set, is told of every model call and its outcome.
	Turn func(req *llm.Request, resp *llm.Response, err error)
	// Handoff, when set, is asked of every tool call before it runs
	// whether its tool is client-final (run by the client, not here).
	// For such a call it returns hand true and the call as the client
	// gets it (its arguments checked against the tool's input schema and
	// shaped), or, when they are malformed, a refusal the model is told
	// instead: a refused call does not pause the loop. A turn that asks
	// for client-final calls runs its other calls first, then the loop
	// pauses (Result.Paused) until Resume brings the client's results.
	Handoff func(ctx context.Context, tc llm.ToolCall) (out llm.ToolCall, refusal string, hand bool)
}

// State is a paused loop: what Resume goes on from. It is plain JSON, kept
// with the run's pause.
type State struct {
	// Messages is the conversation through the model's turn that asked
	// for the client's calls.
	Messages []llm.Message `json:"messages"`
	// Done are the results of that turn's calls that ran here (or were
	// refused), by call id.
	Done map[string]string `json:"done"`
	// Pending are the calls the client runs, in the order the model made
	// them.
	Pending []llm.ToolCall `json:"pending"`
	// Turn is the turn that asked for them; Turns, Calls and Usage are the
	// loop's counts so far.
	Turn  int       `json:"turn"`
	Turns int       `json:"turns"`
	Calls int       `json:"calls"`
	Usage llm.Usage `json:"usage"`
}

// Error is why a loop ended without an answer.
type Error struct {
	Code    orchestrate.Code
	Message string
	// Err is the model's error, if any.
	Err error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Result is what a loop came to.
type Result struct {
	// Answer is the model's final text.
	Answer string
	// Messages is the conversation, the answer not included.
	Messages []llm.Message
	// Turns counts the model calls made.
	Turns int
	// Calls counts the tool calls run.
	Calls int
	// Usage sums the tokens of every model call.
	Usage llm.Usage
	// Err is set when the loop ended without an answer.
	Err *Error
	// Paused is set when the loop waits for the client to run
	// State.Pending; Answer is then empty.
	Paused *State
}

// Run runs the loop from msgs, the conversation so far.
func (l *Loop) Run(ctx context.Context, msgs []llm.Message) *Result {
	return l.from(ctx, &Result{Messages: slices.Clone(msgs)}, 0)
}

// Resume goes on with a paused loop: the client's results (by call id,
// what the model is told of each) are appended to the model's turn with
// the results of the calls that ran before the pause, and the model is
// asked again. No model turn and no call of before the pause runs again.
// Every pending call needs a result.
func (l *Loop) Resume(ctx context.Context, st *State, results map[string]string) (*Result, error) {
	if st == nil || len(st.Messages) == 0 {
		return nil, errors.New("resuming a tool loop: it has no paused state")
	}
	turn := st.Messages[len(st.Messages)-1]
	if turn.Role != llm.RoleAssistant || len(turn.ToolCalls) == 0 {
		return nil, errors.New("resuming a tool loop: its state does not end with the model's tool calls")
	}
	for _, p := range st.Pending {
		if _, ok := results[p.ID]; !ok {
			return nil, fmt.Errorf("resuming a tool loop: no result for call %s (%s)", p.ID, p.Name)
		}
	}
	res := &Result{Messages: slices.Clone(st.Messages), Turns: st.Turns, Calls: st.Calls, Usage: st.Usage}
	for _, tc := range turn.ToolCalls {
		content, ok := st.Done[tc.ID]
		if !ok {
			content = results[tc.ID]
		}
		res.Messages = append(res.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: content})
	}
	return l.from(ctx, res, st.Turn+1), nil
}

// from runs the loop's turns from turn on, res holding what came before.
func (l *Loop) from(ctx context.Context, res *Result, first int) *Result {
	b, _ := toolcontext.BudgetFrom(ctx)
	for turn := first; turn <= l.MaxTurns; turn++ {
		r := &llm.Request{System: l.System, Messages: res.Messages, Tools: l.Tools, ToolChoice: llm.ToolChoiceAuto}
		// The last turn asks for the answer without tools: the turns or
		// the calls are spent, or the request's budget has no tool call
		// left (the calls would all be refused).
		last := turn == l.MaxTurns || (l.MaxCalls > 0 && res.Calls >= l.MaxCalls) || len(l.Tools) == 0 || b.Left(budget.ToolCalls) == 0
		if last {
			r.ToolChoice = llm.ToolChoiceNone
			if len(l.Tools) == 0 {
				r.Tools, r.ToolChoice = nil, ""
			}
			if turn > 0 {
				r.Messages = append(slices.Clone(res.Messages), llm.Message{Role: llm.RoleUser, Content: FinalPrompt})
			}
		}
		resp, err := l.Generate(ctx, r)
		res.Turns++
		if l.Turn != nil {
			l.Turn(r, resp, err)
		}
		if err != nil {
			code := orchestrate.CodeModelError
			var ex *budget.Exceeded
			switch {
			case errors.As(err, &ex):
				code = orchestrate.CodeLimitExceeded
			case errors.Is(err, llm.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
				code = orchestrate.CodeTimeout
			}
			res.Err = &Error{Code: code, Message: err.Error(), Err: err}
			return res
		}
		res.Usage = res.Usage.Add(resp.Usage)
		if len(resp.ToolCalls) == 0 || last {
			res.Answer = strings.TrimSpace(resp.Text)
			if len(resp.ToolCalls) > 0 && res.Answer == "" {
				res.Err = &Error{Code: orchestrate.CodeMaxToolSteps, Message: fmt.Sprintf("the model still called tools after %d turns (max_tool_steps) and gave no answer", turn)}
			}
			return res
		}
		if st := l.calls(ctx, res, resp, turn); st != nil {
			res.Paused = st
			return res
		}
	}
	return res // not reached: the last turn returns
}

// calls runs the tool calls of one model turn and appends their results.
// When some are the client's, the others run and the turn's state is
// returned instead: the loop pauses.
func (l *Loop) calls(ctx context.Context, res *Result, resp *llm.Response, turn int) *State {
	res.Messages = append(res.Messages, llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
	done := make(map[string]string, len(resp.ToolCalls))
	var pending []llm.ToolCall
	for _, tc := range resp.ToolCalls {
		content := ""
		switch {
		case l.MaxCalls > 0 && res.Calls >= l.MaxCalls:
			content = fmt.Sprintf("error: not run: the limit of %d tool calls was reached", l.MaxCalls)
		default:
			if l.Handoff != nil {
				out, refusal, hand := l.Handoff(ctx, tc)
				if hand && refusal == "" {
					res.Calls++
					pending = append(pending, out)
					continue
				}
				if hand {
					done[tc.ID] = refusal
					continue
				}
			}
			res.Calls++
			content = l.Call(ctx, tc)
		}
		done[tc.ID] = content
	}
	if len(pending) > 0 {
		return &State{Messages: slices.Clone(res.Messages), Done: done, Pending: pending, Turn: turn, Turns: res.Turns, Calls: res.Calls, Usage: res.Usage}
	}
	for _, tc := range resp.ToolCalls {
		res.Messages = append(res.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: done[tc.ID]})
	}
	return nil
}
