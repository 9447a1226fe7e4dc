package toolloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// ClientHandoff returns a Loop.Handoff that hands the calls of the tools
// in byName that final reports client-final to the client, their
// arguments checked against the tool's input schema and shaped by it
// (Preflight). A malformed call is refused to the model, recorded as a
// failed step of c, and does not pause the loop.
func ClientHandoff(c *orchestrate.ChildRun, byName map[string]registry.Tool, final func(registry.Tool) bool) func(context.Context, llm.ToolCall) (llm.ToolCall, string, bool) {
	return func(_ context.Context, tc llm.ToolCall) (llm.ToolCall, string, bool) {
		t, ok := byName[tc.Name]
		if !ok || !final(t) {
			return tc, "", false
		}
		args, err := Preflight(t, tc.Arguments)
		if err != nil {
			msg := fmt.Sprintf("invalid call of %s, not sent to the client: %v; fix the arguments and call it again", tc.Name, err)
			now := time.Now()
			c.Step("refused", &orchestrate.StepRecord{Type: "tool", Tool: tc.Name, Status: orchestrate.StatusFailed, StartedAt: &now,
				Error: &orchestrate.Error{Code: orchestrate.CodeInvalidArguments, Message: msg}})
			return tc, "error: " + msg, true
		}
		out := tc
		out.Arguments, _ = json.Marshal(args)
		return out, "", true
	}
}

// Preflight checks the arguments of a client call against its tool's
// input schema and fills the schema's defaults: what the client gets.
func Preflight(t registry.Tool, raw json.RawMessage) (map[string]any, error) {
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

// Handoff returns what a loop paused at st hands to the client: its
// calls, with state (the loop's state as its owner keeps it) to take up.
func (st *State) Handoff(state json.RawMessage) *registry.Handoff {
	h := &registry.Handoff{State: state}
	for _, p := range st.Pending {
		var args map[string]any
		_ = json.Unmarshal(p.Arguments, &args)
		h.Calls = append(h.Calls, registry.HandoffCall{ID: p.ID, Tool: p.Name, Arguments: args})
	}
	return h
}

// ClientResults records the client's results of the calls a loop paused
// at st handed to it (given, by call id) as steps of c, and returns what
// the model is told of each, cut to maxBytes: a result {"error": "..."}
// is a failed call.
func ClientResults(c *orchestrate.ChildRun, st *State, given map[string]any, maxBytes int) map[string]string {
	out := make(map[string]string, len(given))
	for _, p := range st.Pending {
		v := given[p.ID]
		now := time.Now()
		var args map[string]any
		_ = json.Unmarshal(p.Arguments, &args)
		rec := &orchestrate.StepRecord{Type: "tool", Tool: p.Name, Arguments: args, Status: orchestrate.StatusSuccess, Attempts: 1, StartedAt: &now, Output: v}
		if msg, failed := orchestrate.ClientFailure(v); failed {
			rec.Status, rec.Output = orchestrate.StatusFailed, nil
			rec.Error = &orchestrate.Error{Code: orchestrate.CodeClientError, Message: msg}
			out[p.ID] = "error: " + string(orchestrate.CodeClientError) + ": " + msg
			c.Step("client", rec)
			continue
		}
		data, err := json.Marshal(v)
		if err != nil {
			data = []byte(`"(the client's result could not be encoded)"`)
		}
		out[p.ID] = textcut.Truncate(string(data), maxBytes)
		c.Step("client", rec)
	}
	return out
}

// Parameters returns a tool's input schema as the model's tool
// parameters: in the form the model APIs accept (schemas.PortableInput).
func Parameters(s *jsonschema.Schema) map[string]any {
	if s == nil {
		return map[string]any{"type": "object"}
	}
	data, err := schemas.PortableInput(s)
	if err != nil {
		return map[string]any{"type": "object"}
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return map[string]any{"type": "object"}
	}
	return m
}
