//go:build !no_openai

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

const openAIAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test-0001",
 "choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],
 "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`

const openAIToolAnswer = `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-test-0001",
 "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
   {"id":"call_abc","type":"function","function":{"name":"__planning__","arguments":"{\"type\":\"direct_response\",\"content\":\"hi\"}"}}]},
   "finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`

func newOpenAI(t *testing.T, f *fakeAPI, cfg llm.Config, getenv func(string) string) llm.Model {
	t.Helper()
	cfg.Provider = "openai"
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	if f != nil && cfg.BaseURL == "" {
		cfg.BaseURL = f.URL + "/v1"
	}
	m, err := llm.New(cfg, llm.Options{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpenAIPlainAnswer(t *testing.T) {
	f := newFakeAPI(t, jsonReply(200, openAIAnswer))
	m := newOpenAI(t, f, llm.Config{}, env("OPENAI_API_KEY", "sk-test"))
	resp, err := m.Generate(t.Context(), &llm.Request{
		System:   "Be brief.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say hello."}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{Text: "Hello there.", Usage: llm.Usage{InputTokens: 12, OutputTokens: 3}, Model: "gpt-test-0001", StopReason: llm.StopEndTurn}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if got := f.paths[0]; got != "/v1/chat/completions" {
		t.Errorf("path = %q", got)
	}
	if got := f.header(0).Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	body := f.body(0)
	wantMsgs := []any{
		map[string]any{"role": "system", "content": "Be brief."},
		map[string]any{"role": "user", "content": "Say hello."},
	}
	if diff := cmp.Diff(wantMsgs, body["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if body["model"] != "gpt-test" {
		t.Errorf("model = %v", body["model"])
	}
	for _, k := range []string{"tools", "tool_choice", "temperature", "max_tokens"} {
		if _, ok := body[k]; ok {
			t.Errorf("body has %q, want it omitted: %v", k, body[k])
		}
	}
	if m.Name() != "openai:gpt-test" {
		t.Errorf("Name = %q", m.Name())
	}
}

func TestOpenAIToolCall(t *testing.T) {
	f := newFakeAPI(t, jsonReply(200, openAIToolAnswer))
	m := newOpenAI(t, f, llm.Config{MaxTokens: 500, Temperature: new(0.5), Headers: map[string]string{"X-Title": "orchestra"}}, env())
	resp, err := m.Generate(t.Context(), &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Plan it."},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "__planning__", Arguments: json.RawMessage(`{"type":"bad"}`)}}},
			{Role: llm.RoleTool, ToolCallID: "call_0", Content: "invalid: unknown type"},
		},
		Tools:       []llm.ToolDef{planningTool},
		ToolChoice:  "__planning__",
		Temperature: new(0.0),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		ToolCalls:  []llm.ToolCall{{ID: "call_abc", Name: "__planning__", Arguments: json.RawMessage(`{"type":"direct_response","content":"hi"}`)}},
		Usage:      llm.Usage{InputTokens: 120, OutputTokens: 30},
		Model:      "gpt-test-0001",
		StopReason: llm.StopToolUse,
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	body := f.body(0)
	if got := f.header(0).Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none for a keyless local server", got)
	}
	if got := f.header(0).Get("X-Title"); got != "orchestra" {
		t.Errorf("X-Title = %q", got)
	}
	wantTools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "__planning__", "description": "Write the plan.", "strict": true,
		"parameters": planningTool.Parameters,
	}}}
	// Compare through JSON so []any and []string agree.
	if diff := cmp.Diff(jsonValue(t, wantTools), body["tools"]); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "function", "function": map[string]any{"name": "__planning__"}}, body["tool_choice"]); diff != "" {
		t.Errorf("tool_choice (-want +got):\n%s", diff)
	}
	if body["max_tokens"] != 500.0 || body["temperature"] != 0.0 {
		t.Errorf("max_tokens = %v, temperature = %v; want 500 and the request's 0", body["max_tokens"], body["temperature"])
	}
	wantMsgs := jsonValue(t, []any{
		map[string]any{"role": "user", "content": "Plan it."},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_0", "type": "function",
			"function": map[string]any{"name": "__planning__", "arguments": `{"type":"bad"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_0", "content": "invalid: unknown type"},
	})
	if diff := cmp.Diff(wantMsgs, body["messages"]); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestOpenAIToolChoiceModes(t *testing.T) {
	for _, choice := range []string{"auto", "required", "none"} {
		f := newFakeAPI(t, jsonReply(200, openAIAnswer))
		m := newOpenAI(t, f, llm.Config{}, env("OPENAI_API_KEY", "k"))
		_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, Tools: []llm.ToolDef{planningTool}, ToolChoice: choice})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.body(0)["tool_choice"]; got != choice {
			t.Errorf("tool_choice = %v, want %q", got, choice)
		}
	}
}

func TestOpenAIBadToolArguments(t *testing.T) {
	answer := strings.Replace(openAIToolAnswer, `"{\"type\":\"direct_response\",\"content\":\"hi\"}"`, `"{\"type\": oops"`, 1)
	f := newFakeAPI(t, jsonReply(200, answer))
	m := newOpenAI(t, f, llm.Config{}, env("OPENAI_API_KEY", "k"))
	resp, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, Tools: []llm.ToolDef{planningTool}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.ToolCalls[0].Arguments); got != `"{\"type\": oops"` {
		t.Errorf("arguments = %s, want the model's text as a JSON string", got)
	}
}

func TestOpenAIErrors(t *testing.T) {
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
			reply:    jsonReply(400, `{"error":{"message":"The model 'nope' does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
			getenv:   env("OPENAI_API_KEY", "k"),
			kind:     llm.ErrBadRequest,
			status:   400,
			contains: []string{"chat completion with gpt-test", "does not exist"},
		},
		{
			name:     "unauthorized names the env var",
			reply:    jsonReply(401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`),
			cfg:      llm.Config{APIKeyEnv: "MY_PLANNER_KEY"},
			getenv:   env("MY_PLANNER_KEY", "wrong"),
			kind:     llm.ErrAuth,
			status:   401,
			contains: []string{"MY_PLANNER_KEY", "Incorrect API key"},
		},
		{
			name:     "forbidden without key",
			reply:    jsonReply(403, `{"error":{"message":"forbidden","type":"permission_error"}}`),
			getenv:   env(),
			kind:     llm.ErrAuth,
			status:   403,
			contains: []string{"OPENAI_API_KEY holds no API key"},
		},
		{
			name:       "rate limited after retries",
			reply:      jsonReply(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After", "7"),
			cfg:        llm.Config{MaxRetries: -1},
			getenv:     env("OPENAI_API_KEY", "k"),
			kind:       llm.ErrRateLimited,
			status:     429,
			retryAfter: 7 * time.Second,
			contains:   []string{"rate limited", "retry after 7s"},
		},
		{
			name:   "server error",
			reply:  jsonReply(500, `{"error":{"message":"boom","type":"server_error"}}`),
			cfg:    llm.Config{MaxRetries: -1},
			getenv: env("OPENAI_API_KEY", "k"),
			kind:   llm.ErrUnavailable,
			status: 500,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, tt.reply)
			m := newOpenAI(t, f, tt.cfg, tt.getenv)
			_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
			checkError(t, err, tt.kind, tt.status, tt.retryAfter, tt.contains...)
			if tt.cfg.MaxRetries < 0 && f.count() != 1 {
				t.Errorf("%d requests, want 1 with retries off", f.count())
			}
		})
	}
}

func TestOpenAIRetriesRateLimit(t *testing.T) {
	f := newFakeAPI(t,
		jsonReply(429, `{"error":{"message":"slow down","type":"requests"}}`, "Retry-After", "0.01"),
		jsonReply(200, openAIAnswer))
	m := newOpenAI(t, f, llm.Config{}, env("OPENAI_API_KEY", "k"))
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

func TestOpenAIMaxRetries(t *testing.T) {
	f := newFakeAPI(t, jsonReply(429, `{"error":{"message":"slow down"}}`, "Retry-After-Ms", "1"))
	m := newOpenAI(t, f, llm.Config{MaxRetries: 3}, env("OPENAI_API_KEY", "k"))
	_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if !errors.Is(err, llm.ErrRateLimited) {
		t.Fatalf("error = %v, want rate limited", err)
	}
	if n := f.count(); n != 4 {
		t.Errorf("%d requests, want 4 (three retries)", n)
	}
}

func TestOpenAITimeout(t *testing.T) {
	f := newFakeAPI(t, blockReply)
	m := newOpenAI(t, f, llm.Config{Timeout: llm.Duration(50 * time.Millisecond), MaxRetries: -1}, env("OPENAI_API_KEY", "k"))
	_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if !errors.Is(err, llm.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want a timeout", err)
	}
}

func TestOpenAICancel(t *testing.T) {
	f := newFakeAPI(t, blockReply)
	m := newOpenAI(t, f, llm.Config{}, env("OPENAI_API_KEY", "k"))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-f.arrived
		cancel()
	}()
	_, err := m.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if !errors.Is(err, context.Canceled) || errors.Is(err, llm.ErrTimeout) {
		t.Fatalf("error = %v, want the caller's cancellation", err)
	}
	if n := f.count(); n != 1 {
		t.Errorf("%d requests, want 1: a cancelled call is not retried", n)
	}
}

func TestOpenAIIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/elsewhere")
	t.Setenv("OPENAI_API_KEY", "sk-from-environment")
	f := newFakeAPI(t, jsonReply(200, openAIAnswer))
	m := newOpenAI(t, f, llm.Config{APIKeyEnv: "LOCAL_KEY"}, env())
	if _, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if got := f.header(0).Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q: a key from another variable was sent to the configured server", got)
	}
}

func TestOpenAIConfigErrors(t *testing.T) {
	_, err := llm.New(llm.Config{Provider: "openai", Model: "gpt-test"}, llm.Options{Getenv: env()})
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
	_, err = llm.New(llm.Config{Provider: "openai", Model: "gpt-test", APIKeyEnv: "OTHER"}, llm.Options{Getenv: env()})
	if err == nil || !strings.Contains(err.Error(), "OTHER") {
		t.Errorf("missing key in a named variable: %v", err)
	}
	_, err = llm.New(llm.Config{Provider: "openai"}, llm.Options{Getenv: env("OPENAI_API_KEY", "k")})
	if err == nil || !strings.Contains(err.Error(), "planner.model") {
		t.Errorf("missing model: %v", err)
	}
	if _, err := llm.New(llm.Config{Provider: "openai", Model: "llama3", BaseURL: "http://localhost:11434/v1"}, llm.Options{Getenv: env()}); err != nil {
		t.Errorf("a local server needs no key: %v", err)
	}
}

func TestRequestValidation(t *testing.T) {
	m := newOpenAI(t, nil, llm.Config{BaseURL: "http://127.0.0.1:1"}, env())
	_, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, ToolChoice: "missing"})
	if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("error = %v", err)
	}
	_, err = m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "robot", Content: "x"}}})
	if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), "robot") {
		t.Errorf("error = %v", err)
	}
}
