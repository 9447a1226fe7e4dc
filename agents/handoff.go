package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
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
// its user: the run that called it, or, called directly, the catalog's
// client-final tools (none of which it can pause for) and the caller's
// elicitation, if its client has it.
type clientSide struct {
	cs     *orchestrate.ClientSide // nil when no run can pause for the client
	final  func(registry.Tool) bool
	elicit orchestrate.Elicit // nil: ask_user is handed to the client
}

func (a *Agent) clientSide(ctx context.Context) clientSide {
	if cs, ok := orchestrate.ClientSideFrom(ctx); ok {
		return clientSide{cs: cs, final: cs.Final, elicit: cs.Elicit}
	}
	side := clientSide{final: a.opts.Engine.ClientFinal}
	if a.opts.Elicit != nil {
		side.elicit = a.opts.Elicit(ctx)
	}
	return side
}

// elicits reports whether ask_user asks through the client's elicitation.
func (c clientSide) elicits() bool { return c.elicit != nil }

// preflight checks the arguments of a client call against its tool's
// input schema and fills the schema's defaults: what the client gets.
func preflight(t registry.Tool, raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return nil, errors.New("its arguments are not a JSON object")
		}
	}
	if t.InputSchema == nil {
		return args, nil
	}
	rs, err := schemas.Resolve(t.InputSchema)
	if err != nil {
		return args, nil // a schema that does not resolve cannot be checked
	}
	if err := rs.ApplyDefaults(&args); err != nil {
		return nil, errors.New(schemas.CleanError(err))
	}
	if err := rs.Validate(args); err != nil {
		return nil, errors.New(schemas.CleanError(err))
	}
	return args, nil
}

// handoffFunc is the loop's Handoff: it hands the client-final calls to
// the client, refusing those whose arguments are malformed.
func (a *Agent) handoffFunc(child *orchestrate.ChildRun, byName map[string]registry.Tool, side clientSide) func(context.Context, llm.ToolCall) (llm.ToolCall, string, bool) {
	return func(_ context.Context, tc llm.ToolCall) (llm.ToolCall, string, bool) {
		t, ok := byName[tc.Name]
		if !ok || !side.final(t) || (t.Name == orchestrate.AskUserTool && side.elicits()) {
			return tc, "", false
		}
		args, err := preflight(t, tc.Arguments)
		if err != nil {
			msg := fmt.Sprintf("invalid call of %s, not sent to the client: %v; fix the arguments and call it again", tc.Name, err)
			now := time.Now()
			child.Step("refused", &orchestrate.StepRecord{Type: "tool", Tool: tc.Name, Status: orchestrate.StatusFailed, StartedAt: &now,
				Error: &orchestrate.Error{Code: orchestrate.CodeInvalidArguments, Message: msg}})
			return tc, "error: " + msg, true
		}
		out := tc
		out.Arguments, _ = json.Marshal(args)
		return out, "", true
	}
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
	h := &registry.Handoff{State: state}
	for _, p := range st.Pending {
		var args map[string]any
		_ = json.Unmarshal(p.Arguments, &args)
		h.Calls = append(h.Calls, registry.HandoffCall{ID: p.ID, Tool: p.Name, Arguments: args})
	}
	return h, nil
}

// clientResults records the client's results of a paused loop's calls as
// steps of the child run and returns what the model is told of each.
func clientResults(child *orchestrate.ChildRun, st *toolloop.State, given map[string]any) map[string]string {
	out := make(map[string]string, len(given))
	for _, p := range st.Pending {
		v := given[p.ID]
		now := time.Now()
		var args map[string]any
		_ = json.Unmarshal(p.Arguments, &args)
		rec := &orchestrate.StepRecord{Type: "tool", Tool: p.Name, Arguments: args, Status: orchestrate.StatusSuccess, Attempts: 1, StartedAt: &now, Output: v}
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			if msg, ok := m["error"].(string); ok {
				rec.Status, rec.Output = orchestrate.StatusFailed, nil
				rec.Error = &orchestrate.Error{Code: orchestrate.CodeClientError, Message: msg}
				out[p.ID] = "error: " + string(orchestrate.CodeClientError) + ": " + msg
				child.Step("client", rec)
				continue
			}
		}
		data, err := json.Marshal(v)
		if err != nil {
			data = []byte(`"(the client's result could not be encoded)"`)
		}
		out[p.ID] = textcut.Truncate(string(data), maxToolResultBytes)
		child.Step("client", rec)
	}
	return out
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
