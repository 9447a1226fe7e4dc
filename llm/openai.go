//go:build !no_openai

package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// openAIModel calls an OpenAI-compatible Chat Completions endpoint.
type openAIModel struct {
	sdkModel
	svc openai.ChatCompletionService
}

// Generate implements [Model].
func (m *openAIModel) Generate(ctx context.Context, req *Request) (*Response, error) {
	return generate(ctx, &m.sdkModel, req, false, m.params, openAIError, whole(&m.sdkModel, m.svc.New, openAIResponse))
}

// NewOpenAI returns a model served by an OpenAI-compatible Chat Completions
// endpoint: OpenAI itself, or, with cfg.BaseURL, Ollama, vLLM, llama.cpp,
// LM Studio, OpenRouter and the like.
//
// The key is read from the environment variable cfg.APIKeyEnv (default
// OPENAI_API_KEY); a missing key is an error unless cfg.BaseURL is set.
// No other environment variable is consulted, so a key meant for one
// endpoint is never sent to another.
//
// When cfg.BaseURL is empty the answer length is sent as
// max_completion_tokens, which current OpenAI models require; otherwise as
// max_tokens, which compatible servers understand.
func NewOpenAI(cfg Config, opts Options) (Model, error) {
	return newSDKModel(ProviderOpenAI, "chat completion", DefaultOpenAIKeyEnv, cfg, opts,
		`"gpt-4o-mini", or the name of a model your server serves`, ", or set planner.base_url to a local server that needs none",
		sdkOptions[option.RequestOption, option.HTTPClient]{option.WithHTTPClient, option.WithMaxRetries, option.WithBaseURL, option.WithEnvironmentProduction, option.WithAPIKey, option.WithHeader},
		func(base sdkModel, ro []option.RequestOption) Model {
			return &openAIModel{sdkModel: base, svc: openai.NewChatCompletionService(ro...)}
		})
}

func (m *openAIModel) params(req *Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.cfg.Model)}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case RoleSystem:
			p.Messages = append(p.Messages, openai.SystemMessage(msg.Content))
		case RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(msg.Content))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if msg.Content != "" {
				a.Content.OfString = param.NewOpt(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: string(argsOrEmpty(tc.Arguments)),
						},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case RoleTool:
			p.Messages = append(p.Messages, openai.ToolMessage(msg.Content, msg.ToolCallID))
		default:
			return p, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Parameters)}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		if t.Strict {
			fd.Strict = param.NewOpt(true)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	switch req.ToolChoice {
	case "":
	case ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
		p.ToolChoice.OfAuto = param.NewOpt(req.ToolChoice)
	default:
		p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice})
	}
	if n := m.cfg.maxTokens(req, 0); n > 0 {
		if m.cfg.BaseURL == "" {
			p.MaxCompletionTokens = param.NewOpt(int64(n))
		} else {
			p.MaxTokens = param.NewOpt(int64(n))
		}
	}
	if t := m.cfg.temperature(req); t != nil {
		p.Temperature = param.NewOpt(*t)
	}
	if req.ResponseSchema != nil {
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Schema: req.ResponseSchema}}
	}
	return p, nil
}

func openAIResponse(cc *openai.ChatCompletion) (*Response, error) {
	if len(cc.Choices) == 0 {
		return nil, errors.New("the answer has no choices")
	}
	ch := cc.Choices[0]
	resp := &Response{
		Text:       ch.Message.Content,
		Model:      cc.Model,
		StopReason: openAIStopReason(ch.FinishReason),
		Usage:      Usage{InputTokens: int(cc.Usage.PromptTokens), OutputTokens: int(cc.Usage.CompletionTokens)},
	}
	if resp.Text == "" && ch.Message.Refusal != "" {
		resp.Text = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: rawArguments(tc.Function.Arguments)})
	}
	return resp, nil
}

func openAIStopReason(s string) string {
	switch s {
	case "stop":
		return StopEndTurn
	case "tool_calls", "function_call":
		return StopToolUse
	case "length":
		return StopMaxTokens
	case "content_filter":
		return StopContentFilter
	}
	return s
}

// openAIError reads an error of the OpenAI SDK: its status, message and
// response.
func openAIError(e *Error) (sdkError, bool) {
	var apiErr *openai.Error
	if !errors.As(e.Err, &apiErr) {
		return sdkError{}, false
	}
	return sdkError{status: apiErr.StatusCode, message: apiErr.Message, response: apiErr.Response}, true
}
