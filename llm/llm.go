package llm

import (
	"context"
	"encoding/json"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Tool choices a [Request] can make besides naming a tool.
const (
	// ToolChoiceAuto lets the model decide whether to call a tool.
	ToolChoiceAuto = "auto"
	// ToolChoiceRequired makes the model call at least one tool.
	ToolChoiceRequired = "required"
	// ToolChoiceNone forbids tool calls.
	ToolChoiceNone = "none"
)

// Normalized stop reasons of a [Response]. A provider's own value is passed
// through when it has no equivalent here.
const (
	StopEndTurn       = "end_turn"
	StopToolUse       = "tool_use"
	StopMaxTokens     = "max_tokens"
	StopSequence      = "stop_sequence"
	StopContentFilter = "content_filter"
)

// Message is one turn of a conversation.
//
// An assistant message may carry the tool calls the model made; a tool message
// carries the result of one of them in Content, with ToolCallID naming the call.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolDef is a function tool offered to the model.
type ToolDef struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments; it must be an object schema.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Strict asks providers that support it to constrain the arguments to the
	// schema exactly (OpenAI structured outputs, Anthropic strict tool use).
	// The schema must then fit the provider's strict subset.
	Strict bool `json:"strict,omitempty"`
}

// ToolCall is a call of a tool made by the model.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Request is one model call.
type Request struct {
	// System is the system prompt.
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []ToolDef `json:"tools,omitempty"`
	// ToolChoice is "" (the provider's default), [ToolChoiceAuto],
	// [ToolChoiceRequired], [ToolChoiceNone], or the name of one of Tools,
	// which the model must then call.
	ToolChoice string `json:"tool_choice,omitempty"`
	// MaxTokens caps the answer; 0 uses the configured default.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature overrides the configured temperature when set.
	Temperature *float64 `json:"temperature,omitempty"`
	// ResponseSchema, when set, asks for a text answer that is JSON
	// matching this JSON Schema, through the provider's JSON schema mode
	// where it has one (OpenAI's response_format); other providers
	// ignore it, and the caller validates the answer.
	ResponseSchema map[string]any `json:"response_schema,omitempty"`
}

// Usage counts the tokens a call consumed.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Response is the model's answer: text, tool calls, or both.
type Response struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
	// Model is the model that answered, as the provider reports it.
	Model string `json:"model,omitempty"`
	// StopReason is one of the Stop constants, or the provider's own value.
	StopReason string `json:"stop_reason,omitempty"`
}

// Model is a source of completions.
//
// Generate makes one call (the provider's own retries included) and respects
// ctx's cancellation and deadline. Errors are of type [*Error] and match the
// sentinel errors of this package with [errors.Is].
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
	// Name is a short description of the model for logs and records,
	// such as "openai:gpt-4o-mini".
	Name() string
}

// toolNamed returns the tool of req named name.
func (req *Request) toolNamed(name string) (ToolDef, bool) {
	for _, t := range req.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return ToolDef{}, false
}

// validate reports requests no provider can serve.
func (req *Request) validate() error {
	if req == nil {
		return &Error{Kind: ErrBadRequest, Err: errNilRequest}
	}
	switch req.ToolChoice {
	case "", ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
	default:
		if _, ok := req.toolNamed(req.ToolChoice); !ok {
			return &Error{Kind: ErrBadRequest, Err: errorf("tool_choice %q names no offered tool", req.ToolChoice)}
		}
	}
	if req.ToolChoice == ToolChoiceRequired && len(req.Tools) == 0 {
		return &Error{Kind: ErrBadRequest, Err: errorf("tool_choice %q with no tools", req.ToolChoice)}
	}
	return nil
}
