//go:build !no_anthropic

package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
)

// anthropicModel calls the Anthropic Messages API.
type anthropicModel struct {
	sdkModel
	svc anthropic.MessageService
}

// NewAnthropic returns a model served by the Anthropic Messages API.
//
// The key is read from the environment variable cfg.APIKeyEnv (default
// ANTHROPIC_API_KEY); a missing key is an error unless cfg.BaseURL points at
// a gateway that adds its own. No other environment variable is consulted.
// The answer length defaults to [DefaultMaxTokens], as the API requires one.
func NewAnthropic(cfg Config, opts Options) (Model, error) {
	return newSDKModel(ProviderAnthropic, "message", DefaultAnthropicKeyEnv, cfg, opts, `"claude-sonnet-4-5"`, "",
		sdkOptions[option.RequestOption, option.HTTPClient]{option.WithHTTPClient, option.WithMaxRetries, option.WithBaseURL, option.WithEnvironmentProduction, option.WithAPIKey, option.WithHeader},
		func(base sdkModel, ro []option.RequestOption) Model {
			return &anthropicModel{sdkModel: base, svc: anthropic.NewMessageService(ro...)}
		})
}

// Generate implements [Model].
func (m *anthropicModel) Generate(ctx context.Context, req *Request) (*Response, error) {
	return generate(ctx, &m.sdkModel, req, false, m.params, anthropicError, whole(&m.sdkModel, m.svc.New, anthropicResponse))
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

// anthropicResponse reads a message as a Response. Every message reads
// (the error is the shape of whole's reader).
func anthropicResponse(msg *anthropic.Message) (*Response, error) {
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
	return resp, nil
}

// anthropicError reads an error of the Anthropic SDK: its status, the
// message of its body, and its response. The SDK's own message repeats the
// whole body: err shows the status line in its place.
func anthropicError(e *Error) (sdkError, bool) {
	var apiErr *anthropic.Error
	if !errors.As(e.Err, &apiErr) {
		return sdkError{}, false
	}
	se := sdkError{status: apiErr.StatusCode, response: apiErr.Response,
		err: &shortError{summary: fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode)), err: e.Err}}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(apiErr.RawJSON()), &body) == nil {
		se.message = body.Error.Message
	}
	return se, true
}

// shortError shows summary in place of err's longer message.
type shortError struct {
	summary string
	err     error
}

func (e *shortError) Error() string { return e.summary }
func (e *shortError) Unwrap() error { return e.err }
