package agents

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// ExecutionRequest is what an agent is asked: the input of its tool.
type ExecutionRequest struct {
	// UserQuery is what the agent should do ("prompt" is accepted too).
	UserQuery string `json:"user_query,omitempty"`
	// Action names one of the agent's actions.
	Action string `json:"action,omitempty"`
	// ParsedParameters are the action's parameters ("with" is accepted too).
	ParsedParameters map[string]any `json:"parsed_parameters,omitempty"`
	// SessionContext is what the caller knows of the user and the session.
	SessionContext map[string]any `json:"session_context,omitempty"`
	// AgentInstructions add to the agent's own instructions for this request.
	AgentInstructions string `json:"agent_instructions,omitempty"`
	// RequestID is echoed in the response; without it the response
	// carries the request's own id (one is made when there is none).
	RequestID string `json:"request_id,omitempty"`
	// RoutingMode says who chose the agent: RoutingManual (the caller, the
	// default) or RoutingAuto (a router). A call whose agent orchestra's
	// planner, its fallback or another agent chose is auto whatever it says.
	RoutingMode string `json:"routing_mode,omitempty"`
	// SelectedAgent, when set, names the agent the request is for: it must
	// be the agent called.
	SelectedAgent string `json:"selected_agent,omitempty"`
}

// Routing modes of an [ExecutionRequest].
const (
	RoutingAuto   = "auto"
	RoutingManual = "manual"
)

// Statuses of an [ExecutionResponse].
const (
	StatusSuccess = "success"
	StatusError   = "error"
	StatusPartial = "partial"
	// StatusAwaitingClient: the agent, called directly, waits for the
	// client to run the calls in pending; resume says how to go on.
	StatusAwaitingClient = orchestrate.StatusAwaitingClient
)

// ExecutionResponse is what an agent answers: the structured output of its
// tool.
type ExecutionResponse struct {
	RequestID string         `json:"request_id"`
	Status    string         `json:"status"`
	Result    Result         `json:"result"`
	Error     *ResponseError `json:"error"`
	Metadata  Metadata       `json:"metadata"`
	// Pending and Resume are set with status awaiting_client, as in an
	// orchestration's envelope: the calls the client runs, and how to go
	// on with their results.
	Pending []*orchestrate.PendingCall `json:"pending,omitempty"`
	Resume  *orchestrate.ResumeHint    `json:"resume,omitempty"`
}

// Result is an agent's answer: its text, and with an output_schema the
// JSON data matching it.
type Result struct {
	Text string `json:"text"`
	Data any    `json:"data,omitempty"`
}

// ResponseError says why an agent did not answer.
type ResponseError struct {
	Code    orchestrate.Code `json:"code"`
	Message string           `json:"message"`
}

// Metadata is the account of an agent's run.
type Metadata struct {
	Agent      string `json:"agent"`
	Model      string `json:"model"`
	ModelCalls int    `json:"model_calls"`
	ToolCalls  int    `json:"tool_calls"`
	TokensIn   int    `json:"tokens_in"`
	TokensOut  int    `json:"tokens_out"`
	DurationMS int64  `json:"duration_ms"`
	// CostUSD is what the model calls cost, in US dollars, priced by the
	// configuration's pricing; absent when a call's model has no price
	// there (or no call was made).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// ExecID names the agent run's execution record, a child of the
	// caller's.
	ExecID string `json:"exec_id"`
	// RoutingMode is who chose the agent: RoutingAuto or RoutingManual.
	RoutingMode string `json:"routing_mode"`
	// Tools names the tools the agent called, each once, in the order of
	// their first call.
	Tools []string `json:"tools"`
	// ConfigVersion names the agent's configuration: a hash of its block
	// (agents.<name>), the same as long as the block is.
	ConfigVersion string `json:"config_version"`

	unpriced bool // a model call had no price: no cost is known
}

// price adds the cost of one model call, or, when it had no price, makes
// the whole cost unknown.
func (m *Metadata) price(usd float64, priced bool) {
	switch {
	case m.unpriced:
	case !priced:
		m.unpriced, m.CostUSD = true, nil
	case m.CostUSD == nil:
		m.CostUSD = &usd
	default:
		*m.CostUSD += usd
	}
}

// decodeRequest reads an ExecutionRequest from a tool's arguments,
// accepting prompt for user_query and with for parsed_parameters.
func decodeRequest(args map[string]any) (*ExecutionRequest, error) {
	a := maps.Clone(args)
	for alias, name := range map[string]string{"prompt": "user_query", "with": "parsed_parameters"} {
		if v, ok := a[alias]; ok {
			if _, both := a[name]; both {
				return nil, fmt.Errorf("%s and %s are the same field; send one", alias, name)
			}
			a[name] = v
			delete(a, alias)
		}
	}
	data, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	var req ExecutionRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	switch req.RoutingMode {
	case "", RoutingAuto, RoutingManual:
	default:
		return nil, fmt.Errorf("routing_mode is %q; send %q (a router chose the agent) or %q (the caller did), or leave it out", req.RoutingMode, RoutingAuto, RoutingManual)
	}
	return &req, nil
}

// inputSchema is the schema of an agent's tool input.
func inputSchema(actions []string) *jsonschema.Schema {
	obj := func(desc string) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Description: desc}
	}
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	s := &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"user_query":         str("What the agent should do."),
			"prompt":             str("Another name for user_query."),
			"action":             str("One of the agent's actions."),
			"parsed_parameters":  obj("The action's parameters."),
			"with":               obj("Another name for parsed_parameters."),
			"session_context":    obj("What is known of the user and the session."),
			"agent_instructions": str("Instructions added to the agent's own for this request."),
			"request_id":         str("Echoed in the response; made when not sent."),
			"routing_mode":       {Type: "string", Enum: []any{RoutingAuto, RoutingManual}, Description: "Who chose this agent: a router (auto) or the caller (manual, the default)."},
			"selected_agent":     str("This agent's name, when sent."),
		},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	if len(actions) > 0 {
		for _, a := range slices.Sorted(slices.Values(actions)) {
			s.Properties["action"].Enum = append(s.Properties["action"].Enum, a)
		}
	} else {
		delete(s.Properties, "action")
	}
	return s
}

// outputSchema is the schema of an agent's tool output; data is the
// agent's output_schema, when it has one.
func outputSchema(data *jsonschema.Schema) *jsonschema.Schema {
	integer := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "integer"} }
	str := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} }
	result := &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"text": str()},
		Required:   []string{"text"},
	}
	if data != nil {
		result.Properties["data"] = data
	}
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"request_id": str(),
			"status":     {Type: "string", Enum: []any{StatusSuccess, StatusError, StatusPartial, StatusAwaitingClient}},
			// The pending calls and the resume hint as the envelope has
			// them (orchestrate.PendingCall, orchestrate.ResumeHint); their
			// fields are not listed, so that a planner's view of the
			// agent's output stays on its result.
			"pending": {Type: "array", Description: "With status awaiting_client: the calls the client runs before the agent goes on ({call_id, step, agent, tool, arguments}).", Items: &jsonschema.Schema{Type: "object"}},
			"resume":  {Type: "object", Description: "With status awaiting_client: how to go on ({exec_id, expires_at, how}: agent_orchestrate's resume, or orchestra resume)."},
			"result":  result,
			"error": {
				Types:      []string{"object", "null"},
				Properties: map[string]*jsonschema.Schema{"code": str(), "message": str()},
				Required:   []string{"code", "message"},
			},
			"metadata": {
				Type: "object",
				Properties: map[string]*jsonschema.Schema{
					"agent": str(), "model": str(), "exec_id": str(),
					"model_calls": integer(), "tool_calls": integer(), "tokens_in": integer(), "tokens_out": integer(), "duration_ms": integer(),
					"cost_usd":       {Type: "number", Description: "What the model calls cost in US dollars, from the configured pricing; absent when a model has no price."},
					"routing_mode":   {Type: "string", Enum: []any{RoutingAuto, RoutingManual}},
					"tools":          {Type: "array", Items: str()},
					"config_version": str(),
				},
				Required: []string{"agent", "model", "model_calls", "tool_calls", "tokens_in", "tokens_out", "duration_ms", "exec_id", "routing_mode", "tools", "config_version"},
			},
		},
		Required: []string{"request_id", "status", "result", "error", "metadata"},
	}
}
