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
}

// Run runs the loop from msgs, the conversation so far.
func (l *Loop) Run(ctx context.Context, msgs []llm.Message) *Result {
	res := &Result{Messages: slices.Clone(msgs)}
	b, _ := toolcontext.BudgetFrom(ctx)
	for turn := 0; turn <= l.MaxTurns; turn++ {
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
		res.Messages = append(res.Messages, llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			content := ""
			if l.MaxCalls > 0 && res.Calls >= l.MaxCalls {
				content = fmt.Sprintf("error: not run: the limit of %d tool calls was reached", l.MaxCalls)
			} else {
				res.Calls++
				content = l.Call(ctx, tc)
			}
			res.Messages = append(res.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: content})
		}
	}
	return res // not reached: the last turn returns
}
