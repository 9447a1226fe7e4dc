//go:build !no_anthropic

package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
)

// anthropicModel calls the Anthropic Messages API.
type anthropicModel struct {
	cfg    Config
	keyEnv string
	hasKey bool
	svc    anthropic.MessageService
	log    *slog.Logger
}

// NewAnthropic returns a model served by the Anthropic Messages API.
//
// The key is read from the environment variable cfg.APIKeyEnv (default
// ANTHROPIC_API_KEY); a missing key is an error unless cfg.BaseURL points at
// a gateway that adds its own. No other environment variable is consulted.
// The answer length defaults to [DefaultMaxTokens], as the API requires one.
func NewAnthropic(cfg Config, opts Options) (Model, error) {
	env, key, hc, err := cfg.credentials(ProviderAnthropic, DefaultAnthropicKeyEnv, opts, `"claude-sonnet-4-5"`, "")
	if err != nil {
		return nil, err
	}
	ro := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(cfg.maxRetries()),
	}
	if cfg.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(cfg.BaseURL))
	} else {
		ro = append(ro, option.WithEnvironmentProduction())
	}
	if key != "" {
		ro = append(ro, option.WithAPIKey(key))
	}
	for k, v := range cfg.Headers {
		ro = append(ro, option.WithHeader(k, v))
	}
	return &anthropicModel{
		cfg:    cfg,
		keyEnv: env,
		hasKey: key != "",
		svc:    anthropic.NewMessageService(ro...),
		log:    opts.logger(),
	}, nil
}

// Name implements [Model].
func (m *anthropicModel) Name() string { return ProviderAnthropic + ":" + m.cfg.Model }

// Generate implements [Model].
func (m *anthropicModel) Generate(ctx context.Context, req *Request) (*Response, error) {
	op, params, err := m.request(req)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, m.cfg.timeout())
	defer cancel()
	start := time.Now()
	msg, err := m.svc.New(tctx, params)
	if err != nil {
		e := m.wrap(ctx, op, err)
		m.log.DebugContext(ctx, "model call failed", "model", m.Name(), "duration", time.Since(start), "error", e)
		return nil, e
	}
	resp := anthropicResponse(msg)
	m.log.DebugContext(ctx, "model call", "model", m.Name(), "duration", time.Since(start),
		"input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"tool_calls", len(resp.ToolCalls), "stop_reason", resp.StopReason)
	return resp, nil
}

// request names the call for errors and builds its parameters, or says
// why req cannot be sent.
func (m *anthropicModel) request(req *Request) (string, anthropic.MessageNewParams, error) {
	op := "message with " + m.cfg.Model
	if err := req.validate(); err != nil {
		return op, anthropic.MessageNewParams{}, withOp(err, ProviderAnthropic, op)
	}
	params, err := m.params(req)
	if err != nil {
		return op, params, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadRequest, Err: err}
	}
	return op, params, nil
}

func (m *anthropicModel) params(req *Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.cfg.Model),
		MaxTokens: int64(m.cfg.maxTokens(req, DefaultMaxTokens)),
	}
	if req.System != "" {
		p.System = append(p.System, anthropic.TextBlockParam{Text: req.System})
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case RoleSystem:
			p.System = append(p.System, anthropic.TextBlockParam{Text: msg.Content})
		case RoleUser:
			p.Messages = append(p.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(msg.Content)))
		case RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if msg.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, argsOrEmpty(tc.Arguments), tc.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock(""))
			}
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		case RoleTool:
			block := anthropic.NewToolResultBlock(msg.ToolCallID, msg.Content, false)
			// Results of one turn's calls travel together in one user message.
			if n := len(p.Messages); n > 0 && i > 0 && req.Messages[i-1].Role == RoleTool {
				p.Messages[n-1].Content = append(p.Messages[n-1].Content, block)
			} else {
				p.Messages = append(p.Messages, anthropic.NewUserMessage(block))
			}
		default:
			return p, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: anthropicSchema(t.Parameters)}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		if t.Strict {
			tp.Strict = param.NewOpt(true)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	switch req.ToolChoice {
	case "":
	case ToolChoiceAuto:
		p.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{}
	case ToolChoiceRequired:
		p.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
	case ToolChoiceNone:
		p.ToolChoice.OfNone = &anthropic.ToolChoiceNoneParam{}
	default:
		p.ToolChoice.OfTool = &anthropic.ToolChoiceToolParam{Name: req.ToolChoice}
	}
	if t := m.cfg.temperature(req); t != nil {
		p.Temperature = param.NewOpt(*t)
	}
	return p, nil
}

// anthropicSchema splits a JSON Schema into the SDK's input schema shape:
// properties and required, with every other keyword kept as is.
func anthropicSchema(s map[string]any) anthropic.ToolInputSchemaParam {
	var in anthropic.ToolInputSchemaParam
	for k, v := range s {
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			switch r := v.(type) {
			case []string:
				in.Required = r
			case []any:
				for _, x := range r {
					if s, ok := x.(string); ok {
						in.Required = append(in.Required, s)
					}
				}
			}
		default:
			if in.ExtraFields == nil {
				in.ExtraFields = map[string]any{}
			}
			in.ExtraFields[k] = v
		}
	}
	return in
}

func anthropicResponse(msg *anthropic.Message) *Response {
	resp := &Response{
		Model:      string(msg.Model),
		StopReason: string(msg.StopReason),
		Usage:      Usage{InputTokens: int(msg.Usage.InputTokens), OutputTokens: int(msg.Usage.OutputTokens)},
	}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: rawArguments(string(b.Input))})
		}
	}
	resp.Text = strings.Join(text, "")
	return resp
}

// wrap classifies an error of the Anthropic SDK.
func (m *anthropicModel) wrap(parent context.Context, op string, err error) error {
	e := &Error{Provider: ProviderAnthropic, Op: op, Err: err}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		e.StatusCode = apiErr.StatusCode
		e.Kind = kindForStatus(apiErr.StatusCode)
		var body struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(apiErr.RawJSON()), &body) == nil {
			e.Message = body.Error.Message
		}
		// The SDK's message repeats the whole body; show the status line.
		e.Err = &shortError{summary: fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode)), err: err}
		if apiErr.Response != nil {
			e.RetryAfter = retryAfter(apiErr.Response.Header)
		}
	}
	classifyTransport(e, parent)
	if e.Kind == ErrAuth {
		e.Hint = authHint(m.keyEnv, m.hasKey)
	}
	return e
}

// shortError shows summary in place of err's longer message.
type shortError struct {
	summary string
	err     error
}

func (e *shortError) Error() string { return e.summary }
func (e *shortError) Unwrap() error { return e.err }
