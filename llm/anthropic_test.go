//go:build !no_anthropic

package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/llm"
)

const anthropicAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-1",
 "content":[{"type":"text","text":"Hello there."}],
 "stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2}}`

const anthropicToolAnswer = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test-1",
 "content":[{"type":"text","text":"Planning."},{"type":"tool_use","id":"toolu_1","name":"__planning__","input":{"type":"direct_response","content":"hi"}}],
 "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":200,"output_tokens":40}}`

func newAnthropic(t *testing.T, f *fakeAPI, cfg llm.Config, getenv func(string) string) llm.Model {
	t.Helper()
	cfg.Provider = "anthropic"
	if cfg.Model == "" {
		cfg.Model = "claude-test"
	}
	if f != nil {
		cfg.BaseURL = f.URL
	}
	m, err := llm.New(cfg, llm.Options{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAnthropicPlainAnswer(t *testing.T) {
	f := newFakeAPI(t, jsonReply(200, anthropicAnswer))
	m := newAnthropic(t, f, llm.Config{}, env("ANTHROPIC_API_KEY", "sk-ant-test"))
	resp, err := m.Generate(t.Context(), &llm.Request{
		System:   "Be brief.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say hello."}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{Text: "Hello there.", Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}, Model: "claude-test-1", StopReason: llm.StopEndTurn}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if got := f.paths[0]; got != "/v1/messages" {
		t.Errorf("path = %q", got)
	}
	h := f.header(0)
	if got := h.Get("X-Api-Key"); got != "sk-ant-test" {
		t.Errorf("x-api-key = %q", got)
	}
	if h.Get("Anthropic-Version") == "" {
		t.Errorf("no anthropic-version header")
	}
	body := f.body(0)
	want2 := jsonValue(t, map[string]any{
		"model":      "claude-test",
		"max_tokens": llm.DefaultMaxTokens,
		"system":     []any{map[string]any{"type": "text", "text": "Be brief."}},
		"messages":   []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Say hello."}}}},
	})
	if diff := cmp.Diff(want2, any(body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestAnthropicToolCall(t *testing.T) {
	f := newFakeAPI(t, jsonReply(200, anthropicToolAnswer))
	m := newAnthropic(t, f, llm.Config{MaxTokens: 1000, Temperature: new(0.2)}, env("ANTHROPIC_API_KEY", "k"))
	resp, err := m.Generate(t.Context(), &llm.Request{
		System: "Plan.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Plan it."},
			{Role: llm.RoleAssistant, Content: "Trying.", ToolCalls: []llm.ToolCall{
				{ID: "toolu_a", Name: "__planning__", Arguments: json.RawMessage(`{"type":"bad"}`)},
				{ID: "toolu_b", Name: "__planning__", Arguments: json.RawMessage(`{"type":"worse"}`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "toolu_a", Content: "invalid"},
			{Role: llm.RoleTool, ToolCallID: "toolu_b", Content: "also invalid"},
		},
		Tools:      []llm.ToolDef{planningTool},
		ToolChoice: "__planning__",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Planning.",
		ToolCalls:  []llm.ToolCall{{ID: "toolu_1", Name: "__planning__", Arguments: json.RawMessage(`{"type":"direct_response","content":"hi"}`)}},
		Usage:      llm.Usage{InputTokens: 200, OutputTokens: 40},
		Model:      "claude-test-1",
		StopReason: llm.StopToolUse,
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	body := f.body(0)
	if body["max_tokens"] != 1000.0 || body["temperature"] != 0.2 {
		t.Errorf("max_tokens = %v, temperature = %v", body["max_tokens"], body["temperature"])
	}
	wantTools := jsonValue(t, []any{map[string]any{
		"name": "__planning__", "description": "Write the plan.", "strict": true,
		"input_schema": planningTool.Parameters,
	}})
	if diff := cmp.Diff(wantTools, body["tools"]); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "tool", "name": "__planning__"}, body["tool_choice"]); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}
	wantMsgs := jsonValue(t, []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Plan it."}}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "Trying."},
			map[string]any{"type": "tool_use", "id": "toolu_a", "name": "__planning__", "input": map[string]any{"type": "bad"}},
			map[string]any{"type": "tool_use", "id": "toolu_b", "name": "__planning__", "input": map[string]any{"type": "worse"}},
		}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_a", "is_error": false, "content": []any{map[string]any{"type": "text", "text": "invalid"}}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_b", "is_error": false, "content": []any{map[string]any{"type": "text", "text": "also invalid"}}},
		}},
	})
	if diff := cmp.Diff(wantMsgs, body["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestAnthropicToolChoiceModes(t *testing.T) {
	for choice, want := range map[string]string{"auto": "auto", "required": "any", "none": "none"} {
		f := newFakeAPI(t, jsonReply(200, anthropicAnswer))
		m := newAnthropic(t, f, llm.Config{}, env("ANTHROPIC_API_KEY", "k"))
		_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, Tools: []llm.ToolDef{planningTool}, ToolChoice: choice})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(f.body(0), "tool_choice", "type"); got != want {
			t.Errorf("tool_choice %q: type = %v, want %q", choice, got, want)
		}
	}
}

func TestAnthropicErrors(t *testing.T) {
	tests := []struct {
		name       string
		reply      reply
		cfg        llm.Config
		getenv     func(string) string
		kind       error
		status     int
		retryAfter time.Duration
		contains   []string
	}{
		{
			name:     "bad request",
			reply:    jsonReply(400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be positive"}}`),
			getenv:   env("ANTHROPIC_API_KEY", "k"),
			kind:     llm.ErrBadRequest,
			status:   400,
			contains: []string{"message with claude-test", "max_tokens: must be positive"},
		},
		{
			name:     "unauthorized names the env var",
			reply:    jsonReply(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`),
			cfg:      llm.Config{APIKeyEnv: "CLAUDE_KEY"},
			getenv:   env("CLAUDE_KEY", "wrong"),
			kind:     llm.ErrAuth,
			status:   401,
			contains: []string{"CLAUDE_KEY", "invalid x-api-key"},
		},
		{
			name:       "rate limited after retries",
			reply:      jsonReply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "Retry-After", "30"),
			cfg:        llm.Config{MaxRetries: -1},
			getenv:     env("ANTHROPIC_API_KEY", "k"),
			kind:       llm.ErrRateLimited,
			status:     429,
			retryAfter: 30 * time.Second,
			contains:   []string{"slow down"},
		},
		{
			name:   "overloaded",
			reply:  jsonReply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			cfg:    llm.Config{MaxRetries: -1},
			getenv: env("ANTHROPIC_API_KEY", "k"),
			kind:   llm.ErrRateLimited,
			status: 529,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, tt.reply)
			m := newAnthropic(t, f, tt.cfg, tt.getenv)
			_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
			checkError(t, err, tt.kind, tt.status, tt.retryAfter, tt.contains...)
			if strings.Contains(err.Error(), `"type":"error"`) {
				t.Errorf("error repeats the raw body: %v", err)
			}
		})
	}
}

func TestAnthropicRetriesRateLimit(t *testing.T) {
	f := newFakeAPI(t,
		jsonReply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "Retry-After", "0.01"),
		jsonReply(200, anthropicAnswer))
	m := newAnthropic(t, f, llm.Config{}, env("ANTHROPIC_API_KEY", "k"))
	resp, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello there." {
		t.Errorf("text = %q", resp.Text)
	}
	if n := f.count(); n != 2 {
		t.Errorf("%d requests, want 2 (one retry)", n)
	}
}

func TestAnthropicTimeout(t *testing.T) {
	f := newFakeAPI(t, blockReply)
	m := newAnthropic(t, f, llm.Config{Timeout: llm.Duration(50 * time.Millisecond), MaxRetries: -1}, env("ANTHROPIC_API_KEY", "k"))
	_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if !errors.Is(err, llm.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want a timeout", err)
	}
}

func TestAnthropicIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1/elsewhere")
	t.Setenv("ANTHROPIC_API_KEY", "from-environment")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-environment")
	f := newFakeAPI(t, jsonReply(200, anthropicAnswer))
	m := newAnthropic(t, f, llm.Config{APIKeyEnv: "GATEWAY_KEY"}, env())
	if _, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	h := f.header(0)
	if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Errorf("credentials from the SDK's environment variables were sent: %v", h)
	}
}

func TestAnthropicConfigErrors(t *testing.T) {
	_, err := llm.New(llm.Config{Provider: "anthropic", Model: "claude-test"}, llm.Options{Getenv: env()})
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
}
