package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolloop"
)

// Handoff (seed 004's reasoner). When a model turn asks for client-final
// tools (a request's client tools, tools the configuration marks
// client-final, ask_user without elicitation), the turn's other calls run
// here, each client call is checked against its tool's input schema (a
// malformed one is refused to the model and does not pause), and the
// agent answers with a registry.Handoff: the client's calls and the
// loop's state. The run that called the agent pauses (awaiting_client)
// and keeps the state with its pause; its resume calls the agent again
// with the client's results (registry.CallRequest.Continue), and the loop
// goes on, under the same child run, without repeating a model turn or a
// tool call.

// loopState is what an agent keeps of its paused loop.
type loopState struct {
	Loop toolloop.State `json:"loop"`
	// ExecID names the agent's child run, which goes on after the pause;
	// Steps and Calls are its records so far.
	ExecID string `json:"exec_id"`
	Steps  int    `json:"steps"`
	Calls  int    `json:"calls"`
	// Metadata holds the counts of the response so far.
	Metadata Metadata `json:"metadata"`
	// RemainingMS is what was left of the agent's deadline.
	RemainingMS int64 `json:"remaining_ms,omitempty"`
}

// clientSide is how an agent's loop finds the client's tools and asks
// its user: the run that called it (paused reports that it can pause for
// the client), or, called directly, the catalog's client-final tools and
// the caller's elicitation, if its client has it.
func (a *Agent) clientSide(ctx context.Context) (side *orchestrate.ClientSide, paused bool) {
	if cs, ok := orchestrate.ClientSideFrom(ctx); ok {
		return cs, true
	}
	side = &orchestrate.ClientSide{Final: a.opts.Engine.ClientFinal}
	if a.opts.Elicit != nil {
		side.Elicit = a.opts.Elicit(ctx)
	}
	return side, false
}

// handoff makes the answer of a loop that paused: the client's calls and
// the loop's state.
func (a *Agent) handoff(ctx context.Context, child *orchestrate.ChildRun, resp *ExecutionResponse, st *toolloop.State) (*registry.Handoff, error) {
	steps, calls := child.Counts()
	ls := loopState{Loop: *st, ExecID: child.ExecID(), Steps: steps, Calls: calls, Metadata: resp.Metadata}
	if dl, ok := ctx.Deadline(); ok {
		ls.RemainingMS = max(1, time.Until(dl).Milliseconds())
	}
	state, err := json.Marshal(ls)
	if err != nil {
		return nil, fmt.Errorf("keeping the state of agent %s's loop: %w", a.Name, err)
	}
	return st.Handoff(state), nil
}

// askUser asks the user through the client's elicitation, for an agent's
// ask_user call, and returns what the model is told.
func (a *Agent) askUser(ctx context.Context, child *orchestrate.ChildRun, elicit orchestrate.Elicit, tc llm.ToolCall) string {
	var args map[string]any
	_ = json.Unmarshal(tc.Arguments, &args)
	msg, _ := args["message"].(string)
	schema, _ := args["schema"].(map[string]any)
	start := time.Now()
	rec := &orchestrate.StepRecord{Type: "tool", Tool: tc.Name, Arguments: args, Status: orchestrate.StatusSuccess, Attempts: 1, StartedAt: &start}
	action, content, err := elicit(ctx, msg, schema)
	rec.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		rec.Status, rec.Error = orchestrate.StatusFailed, &orchestrate.Error{Code: orchestrate.CodeToolError, Message: "asking the user: " + err.Error()}
		child.Step("ask", rec)
		return "error: " + rec.Error.Message
	}
	if content == nil {
		content = map[string]any{}
	}
	rec.Output = map[string]any{"action": action, "content": content}
	child.Step("ask", rec)
	data, _ := json.Marshal(rec.Output)
	return string(data)
}
