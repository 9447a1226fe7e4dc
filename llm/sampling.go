package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolMultiRoundTrip is the first protocol version on which a tool
// handler cannot send sampling requests itself.
const protocolMultiRoundTrip = "2026-07-28"

// SamplingOptions configures a sampling model.
type SamplingOptions struct {
	// MaxTokens is the answer cap when the request sets none
	// (default [DefaultMaxTokens]; sampling requires one).
	MaxTokens int
	// Temperature is used when the request sets none.
	Temperature *float64
	// Timeout bounds one call (default: none beyond the context's).
	Timeout time.Duration
	// TextTools never sends function tools, even to clients that accept
	// them: tools are described in the system prompt and the answer is
	// read as JSON in text.
	TextTools bool
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Sampling is a [Model] backed by the MCP client's own model through
// sampling/createMessage. It works where the server may send requests to the
// client: protocol versions before 2026-07-28, or outside a tool handler.
// Inside a tool handler on 2026-07-28, use [InputSampling].
type Sampling struct {
	session *mcp.ServerSession
	opts    SamplingOptions
	log     *slog.Logger
}

// NewSampling returns a model that samples through session with default options.
func NewSampling(session *mcp.ServerSession) *Sampling {
	return NewSamplingWithOptions(session, SamplingOptions{})
}

// NewSamplingWithOptions returns a model that samples through session.
func NewSamplingWithOptions(session *mcp.ServerSession, opts SamplingOptions) *Sampling {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sampling{session: session, opts: opts, log: log}
}

// SamplingFor returns the sampling model for a tool call: [Sampling] through
// the request's session on protocol versions before 2026-07-28, and
// [InputSampling] (which needs key to sign its state) on later ones.
// It fails with [ErrUnavailable] when the client offers no sampling.
func SamplingFor(req *mcp.CallToolRequest, key []byte, opts SamplingOptions) (Model, error) {
	if req == nil || req.Session == nil {
		return nil, &Error{Provider: ProviderSampling, Op: "starting", Kind: ErrUnavailable, Err: errors.New("no client session")}
	}
	if caps := req.ClientCapabilities(); caps == nil || caps.Sampling == nil {
		return nil, errNoSampling()
	}
	if multiRoundTrip(req.Session) {
		return NewInputSampling(key, req, opts)
	}
	return NewSamplingWithOptions(req.Session, opts), nil
}

func errNoSampling() error {
	return &Error{Provider: ProviderSampling, Op: "starting", Kind: ErrUnavailable,
		Err: errors.New(`the client does not support sampling: configure a model in the planner block (provider "openai" or "anthropic")`)}
}

// multiRoundTrip reports whether ss negotiated a protocol on which sampling
// inside a handler goes through input requests.
func multiRoundTrip(ss *mcp.ServerSession) bool {
	if p := ss.InitializeParams(); p != nil && p.ProtocolVersion != "" {
		return p.ProtocolVersion >= protocolMultiRoundTrip
	}
	return true
}

// Name implements [Model].
func (s *Sampling) Name() string { return ProviderSampling }

// Generate implements [Model].
func (s *Sampling) Generate(ctx context.Context, req *Request) (*Response, error) {
	const op = "sampling/createMessage"
	if err := req.validate(); err != nil {
		return nil, withOp(err, ProviderSampling, op)
	}
	if s.session == nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrUnavailable, Err: errors.New("no client session")}
	}
	ip := s.session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Sampling == nil {
		return nil, errNoSampling()
	}
	if multiRoundTrip(s.session) {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrUnavailable,
			Err: fmt.Errorf("on protocol %s a tool handler samples through input requests: use InputSampling", ip.ProtocolVersion)}
	}
	r := s.withDefaults(req)
	useTools := len(r.Tools) > 0 && r.ToolChoice != ToolChoiceNone && ip.Capabilities.Sampling.Tools != nil && !s.opts.TextTools
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	parent := ctx
	start := time.Now()
	var (
		res mcp.InputResponse
		err error
	)
	if useTools {
		var p *mcp.CreateMessageWithToolsParams
		if p, err = CreateMessageWithToolsParams(r); err == nil {
			res, err = s.session.CreateMessageWithTools(ctx, p)
		}
	} else {
		var p *mcp.CreateMessageParams
		if p, err = CreateMessageParams(r); err == nil {
			res, err = s.session.CreateMessage(ctx, p)
		}
	}
	if err != nil {
		e := &Error{Provider: ProviderSampling, Op: op, Err: err}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			switch rpcErr.Code {
			case jsonrpc.CodeInvalidParams:
				e.Kind = ErrBadRequest
			case jsonrpc.CodeMethodNotFound:
				e.Kind = ErrUnavailable
			}
		}
		classifyTransport(e, parent)
		s.log.DebugContext(ctx, "sampling failed", "duration", time.Since(start), "error", e)
		return nil, e
	}
	resp, err := ResponseFromSampling(r, res)
	if err != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadResponse, Err: err}
	}
	s.log.DebugContext(ctx, "sampling", "model", resp.Model, "duration", time.Since(start),
		"tools", useTools, "tool_calls", len(resp.ToolCalls), "stop_reason", resp.StopReason)
	return resp, nil
}

func (s *Sampling) withDefaults(req *Request) *Request {
	return samplingDefaults(req, s.opts)
}

func samplingDefaults(req *Request, opts SamplingOptions) *Request {
	r := *req
	if r.MaxTokens <= 0 {
		r.MaxTokens = opts.MaxTokens
	}
	if r.Temperature == nil {
		r.Temperature = opts.Temperature
	}
	return &r
}

// CreateMessageParams turns req into sampling parameters without function
// tools, for clients that do not accept them: the system prompt describes
// the offered tools and asks for the call as JSON in the text, which
// [ResponseFromSampling] reads back into a [ToolCall]. Tool calls and tool
// results in the history become text.
func CreateMessageParams(req *Request) (*mcp.CreateMessageParams, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	p := &mcp.CreateMessageParams{MaxTokens: samplingMaxTokens(req), Messages: []*mcp.SamplingMessage{}}
	if req.Temperature != nil {
		p.Temperature = *req.Temperature
	}
	system := []string{}
	if req.System != "" {
		system = append(system, req.System)
	}
	for i, m := range req.Messages {
		var role mcp.Role
		var text string
		switch m.Role {
		case RoleSystem:
			system = append(system, m.Content)
			continue
		case RoleUser:
			role, text = "user", m.Content
		case RoleAssistant:
			role, text = "assistant", m.Content
			for _, tc := range m.ToolCalls {
				b, err := json.Marshal(map[string]any{"tool": tc.Name, "arguments": argsOrEmpty(tc.Arguments)})
				if err != nil {
					return nil, fmt.Errorf("message %d: tool call %s: %w", i, tc.Name, err)
				}
				text = joinNonEmpty(text, string(b))
			}
		case RoleTool:
			role, text = "user", fmt.Sprintf("Result of tool call %s:\n%s", m.ToolCallID, m.Content)
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		p.Messages = append(p.Messages, &mcp.SamplingMessage{Role: role, Content: &mcp.TextContent{Text: text}})
	}
	if prompt := textToolPrompt(req); prompt != "" {
		system = append(system, prompt)
	}
	p.SystemPrompt = strings.Join(system, "\n\n")
	return p, nil
}

// CreateMessageWithToolsParams turns req into sampling parameters with
// function tools, for clients that declare the sampling.tools capability.
// A tool choice naming a tool offers that tool only, as required.
func CreateMessageWithToolsParams(req *Request) (*mcp.CreateMessageWithToolsParams, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	p := &mcp.CreateMessageWithToolsParams{MaxTokens: samplingMaxTokens(req), Messages: []*mcp.SamplingMessageV2{}}
	if req.Temperature != nil {
		p.Temperature = *req.Temperature
	}
	system := []string{}
	if req.System != "" {
		system = append(system, req.System)
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			system = append(system, m.Content)
		case RoleUser:
			p.Messages = append(p.Messages, &mcp.SamplingMessageV2{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: m.Content}}})
		case RoleAssistant:
			var content []mcp.Content
			if m.Content != "" {
				content = append(content, &mcp.TextContent{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				var input map[string]any
				if err := json.Unmarshal(argsOrEmpty(tc.Arguments), &input); err != nil {
					return nil, fmt.Errorf("message %d: arguments of tool call %s are not a JSON object: %w", i, tc.Name, err)
				}
				content = append(content, &mcp.ToolUseContent{ID: tc.ID, Name: tc.Name, Input: input})
			}
			if len(content) == 0 {
				content = append(content, &mcp.TextContent{})
			}
			p.Messages = append(p.Messages, &mcp.SamplingMessageV2{Role: "assistant", Content: content})
		case RoleTool:
			block := &mcp.ToolResultContent{ToolUseID: m.ToolCallID, Content: []mcp.Content{&mcp.TextContent{Text: m.Content}}}
			if n := len(p.Messages); n > 0 && i > 0 && req.Messages[i-1].Role == RoleTool {
				p.Messages[n-1].Content = append(p.Messages[n-1].Content, block)
			} else {
				p.Messages = append(p.Messages, &mcp.SamplingMessageV2{Role: "user", Content: []mcp.Content{block}})
			}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	p.SystemPrompt = strings.Join(system, "\n\n")
	for _, t := range offeredTools(req) {
		schema := t.Parameters
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		p.Tools = append(p.Tools, &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	switch req.ToolChoice {
	case "":
	case ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
		p.ToolChoice = &mcp.ToolChoice{Mode: req.ToolChoice}
	default:
		p.ToolChoice = &mcp.ToolChoice{Mode: ToolChoiceRequired}
	}
	return p, nil
}

// ResponseFromSampling turns a client's sampling result — an
// [*mcp.CreateMessageResult] or an [*mcp.CreateMessageWithToolsResult] — into
// a [Response] to req. When the answer has no tool_use blocks but req offers
// tools (and does not forbid them), JSON in the text is read as a call: a
// {"tool": name, "arguments": {...}} object, or, when one tool is offered,
// the object of its arguments.
func ResponseFromSampling(req *Request, res mcp.InputResponse) (*Response, error) {
	var (
		content    []mcp.Content
		model, why string
	)
	switch r := res.(type) {
	case *mcp.CreateMessageResult:
		if r == nil {
			return nil, errors.New("no sampling result")
		}
		if r.Content != nil {
			content = []mcp.Content{r.Content}
		}
		model, why = r.Model, r.StopReason
	case *mcp.CreateMessageWithToolsResult:
		if r == nil {
			return nil, errors.New("no sampling result")
		}
		content, model, why = r.Content, r.Model, r.StopReason
	default:
		return nil, fmt.Errorf("unexpected sampling result %T", res)
	}
	resp := &Response{Model: model, StopReason: samplingStopReason(why)}
	var text []string
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			text = append(text, c.Text)
		case *mcp.ToolUseContent:
			input := c.Input
			if input == nil {
				input = map[string]any{}
			}
			args, err := json.Marshal(input)
			if err != nil {
				return nil, fmt.Errorf("tool call %s: %w", c.Name, err)
			}
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("sampling_call_%d", len(resp.ToolCalls)+1)
			}
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: id, Name: c.Name, Arguments: args})
		default:
			return nil, fmt.Errorf("unexpected %T content in the sampling result", c)
		}
	}
	resp.Text = strings.Join(text, "")
	if len(resp.ToolCalls) == 0 && req != nil {
		if tc, ok := toolCallFromText(req, resp.Text); ok {
			resp.ToolCalls = []ToolCall{tc}
			resp.Text = ""
			resp.StopReason = StopToolUse
		}
	}
	return resp, nil
}

// offeredTools is the tools req lets the model call.
func offeredTools(req *Request) []ToolDef {
	switch req.ToolChoice {
	case ToolChoiceNone:
		return nil
	case "", ToolChoiceAuto, ToolChoiceRequired:
		return req.Tools
	}
	t, _ := req.toolNamed(req.ToolChoice)
	return []ToolDef{t}
}

// textToolPrompt describes the offered tools for a model that answers in text.
func textToolPrompt(req *Request) string {
	tools := offeredTools(req)
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	optional := req.ToolChoice == "" || req.ToolChoice == ToolChoiceAuto
	if len(tools) == 1 {
		t := tools[0]
		fmt.Fprintf(&b, "To call the tool %q", t.Name)
		if t.Description != "" {
			fmt.Fprintf(&b, " (%s)", t.Description)
		}
		b.WriteString(", answer with only a JSON object of its arguments, with no other text, matching this JSON Schema:\n")
		b.WriteString(schemaText(t.Parameters))
	} else {
		b.WriteString(`To call a tool, answer with only a JSON object {"tool": "<tool name>", "arguments": {<its arguments>}}, with no other text. The tools and the JSON Schemas of their arguments:`)
		for _, t := range tools {
			fmt.Fprintf(&b, "\n\n%s", t.Name)
			if t.Description != "" {
				fmt.Fprintf(&b, ": %s", t.Description)
			}
			b.WriteString("\n")
			b.WriteString(schemaText(t.Parameters))
		}
	}
	if optional {
		b.WriteString("\n\nIf no tool is needed, answer in plain text instead.")
	} else {
		b.WriteString("\n\nYou must call a tool.")
	}
	return b.String()
}

func schemaText(s map[string]any) string {
	if s == nil {
		s = map[string]any{"type": "object"}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// toolCallFromText reads a tool call written as JSON in text.
func toolCallFromText(req *Request, text string) (ToolCall, bool) {
	tools := offeredTools(req)
	if len(tools) == 0 || strings.TrimSpace(text) == "" {
		return ToolCall{}, false
	}
	raw, err := ExtractJSON(text)
	if err != nil {
		return ToolCall{}, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ToolCall{}, false
	}
	// {"tool": name, "arguments": {...}} (also "name" for "tool").
	var name string
	if v, ok := obj["tool"]; ok {
		_ = json.Unmarshal(v, &name)
	} else if v, ok := obj["name"]; ok && len(obj) <= 2 {
		_ = json.Unmarshal(v, &name)
	}
	if args, ok := obj["arguments"]; ok && name != "" {
		for _, t := range tools {
			if t.Name == name {
				return ToolCall{ID: "sampling_call_1", Name: name, Arguments: args}, true
			}
		}
	}
	if len(tools) == 1 {
		return ToolCall{ID: "sampling_call_1", Name: tools[0].Name, Arguments: raw}, true
	}
	return ToolCall{}, false
}

func samplingMaxTokens(req *Request) int64 {
	if req.MaxTokens > 0 {
		return int64(req.MaxTokens)
	}
	return DefaultMaxTokens
}

func samplingStopReason(s string) string {
	switch s {
	case "endTurn":
		return StopEndTurn
	case "toolUse":
		return StopToolUse
	case "maxTokens":
		return StopMaxTokens
	case "stopSequence":
		return StopSequence
	}
	return s
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}
