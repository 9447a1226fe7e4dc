package agents

import (
	"fmt"
	"strings"
	"sync"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// An agent answers partial when it got some data but not all of it:
//
//   - it answered, but a tool call of its failed and no later call of the
//     same tool succeeded (the answer lacks what that call would have
//     brought); error carries the failed call's code;
//   - it was stopped (max_tool_steps, timeout) before its answer, after
//     tool calls that returned results; result.text carries those results
//     and error the code of the stop.
//
// A call refused because the tool is not among the agent's tools is no
// failure of its work (the tool never ran, and the model was told which
// tools it has). Without any result, a stopped agent answers error.

// maxSummaryBytes caps the tool results a stopped agent answers with.
const maxSummaryBytes = 16 << 10

// tally keeps what the tool calls of one agent run came to.
type tally struct {
	mu      sync.Mutex
	results []toolResult
	// failures holds, by tool, the last failure of a tool that has not
	// succeeded since; order is the order of their first failure.
	failures map[string]*orchestrate.Error
	order    []string
}

type toolResult struct{ tool, text string }

func (t *tally) succeeded(tool, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.results = append(t.results, toolResult{tool, text})
	delete(t.failures, tool)
}

func (t *tally) failed(tool string, e *orchestrate.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failures == nil {
		t.failures = map[string]*orchestrate.Error{}
	}
	if _, seen := t.failures[tool]; !seen {
		t.order = append(t.order, tool)
	}
	t.failures[tool] = e
}

// hasResults reports whether a tool call brought a result.
func (t *tally) hasResults() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.results) > 0
}

// settle makes an answered response partial when tool calls failed.
func (t *tally) settle(agent string, resp *ExecutionResponse) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if resp.Status != StatusSuccess || len(t.failures) == 0 {
		return
	}
	var parts []string
	var code orchestrate.Code
	for _, tool := range t.order {
		e, ok := t.failures[tool]
		if !ok {
			continue
		}
		if code == "" {
			code = e.Code
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s", tool, e.Code, firstLine(e.Message)))
	}
	if code == "" {
		code = orchestrate.CodeToolError
	}
	resp.Status = StatusPartial
	resp.Error = &ResponseError{Code: code, Message: fmt.Sprintf("agent %s answered, but its calls of %d tool(s) failed: %s", agent, len(parts), strings.Join(parts, "; "))}
}

// summary is the answer of an agent stopped with code before it
// answered: what its tool calls returned.
func (t *tally) summary(agent string, code orchestrate.Code) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "agent %s was stopped (%s) before its answer; what its tool calls returned:", agent, code)
	for _, r := range t.results {
		b.WriteString("\n\n" + r.tool + ": " + r.text)
	}
	return textcut.Truncate(b.String(), maxSummaryBytes)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return textcut.Truncate(s, 300)
}
