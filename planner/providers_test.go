package planner_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// fakeAPI is a local HTTP server speaking a provider's wire format: each
// request gets the next reply (the last one repeats); bodies are recorded.
type fakeAPI struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	// plain answers streaming requests with one JSON body, as servers that
	// do not stream do.
	plain bool
}

type reply func(w http.ResponseWriter, r *http.Request)

func newFakeAPI(t *testing.T, replies ...reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		n := len(f.bodies)
		f.mu.Unlock()
		reply := replies[min(n, len(replies))-1]
		if body["stream"] == true && !f.plain {
			streamed(w, r, reply) // as the provider streams the same answer
			return
		}
		reply(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func jsonReply(status int, body string, headers ...string) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func blockReply(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// streamed answers a streaming request with reply's answer as server-sent
// events, the way the provider (OpenAI's Chat Completions or Anthropic's
// Messages, told apart by the answer) streams it; errors go as they are.
func streamed(w http.ResponseWriter, r *http.Request, reply reply) {
	rec := httptest.NewRecorder()
	reply(rec, r)
	var answer map[string]any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &answer) != nil {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, v any) {
		data, _ := json.Marshal(v)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	if answer["object"] == "chat.completion" {
		chunk := func(choices []any, usage any) {
			c := map[string]any{"id": answer["id"], "object": "chat.completion.chunk", "created": answer["created"], "model": answer["model"], "choices": choices}
			if usage != nil {
				c["usage"] = usage
			}
			send("", c)
		}
		ch := get(answer, "choices", 0)
		msg, _ := get(ch, "message").(map[string]any)
		delta := map[string]any{"role": "assistant"}
		if c, ok := msg["content"].(string); ok {
			delta["content"] = c
		}
		if calls, ok := msg["tool_calls"].([]any); ok {
			for i, tc := range calls {
				tc.(map[string]any)["index"] = i
			}
			delta["tool_calls"] = calls
		}
		chunk([]any{map[string]any{"index": 0, "delta": delta}}, nil)
		chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": get(ch, "finish_reason")}}, nil)
		chunk([]any{}, answer["usage"])
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	usage, _ := answer["usage"].(map[string]any)
	start := map[string]any{}
	for k, v := range answer {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	send("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range answer["content"].([]any) {
		block := b.(map[string]any)
		switch block["type"] {
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
		case "tool_use":
			input, _ := json.Marshal(block["input"])
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": answer["stop_reason"], "stop_sequence": nil}, "usage": map[string]any{"output_tokens": usage["output_tokens"]}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// openAIToolCall is a Chat Completions answer calling name with args.
func openAIToolCall(name, args string) reply {
	encoded, _ := json.Marshal(args)
	return jsonReply(200, fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_abc","type":"function","function":{"name":%q,"arguments":%s}}]}}],
		"usage":{"prompt_tokens":1200,"completion_tokens":80,"total_tokens":1280}}`, name, encoded))
}

func openAIText(text string) reply {
	encoded, _ := json.Marshal(text)
	return jsonReply(200, fmt.Sprintf(`{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],
		"usage":{"prompt_tokens":900,"completion_tokens":40,"total_tokens":940}}`, encoded))
}

// anthropicToolUse is a Messages answer with a tool_use block.
func anthropicToolUse(name, input string) reply {
	return jsonReply(200, fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
		"content":[{"type":"tool_use","id":"toolu_1","name":%q,"input":%s}],
		"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1500,"output_tokens":90}}`, name, input))
}

func anthropicText(text string) reply {
	encoded, _ := json.Marshal(text)
	return jsonReply(200, fmt.Sprintf(`{"id":"msg_2","type":"message","role":"assistant","model":"claude-test",
		"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":700,"output_tokens":30}}`, encoded))
}

func providerModel(t *testing.T, cfg llm.Config) llm.Model {
	t.Helper()
	m, err := llm.New(cfg, llm.Options{Getenv: func(string) string { return "test-key" }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func openAI(t *testing.T, f *fakeAPI, cfg llm.Config) llm.Model {
	cfg.Provider, cfg.Model, cfg.BaseURL = llm.ProviderOpenAI, "gpt-test", f.URL+"/v1"
	return providerModel(t, cfg)
}

func anthropic(t *testing.T, f *fakeAPI, cfg llm.Config) llm.Model {
	cfg.Provider, cfg.Model, cfg.BaseURL = llm.ProviderAnthropic, "claude-test", f.URL
	return providerModel(t, cfg)
}

func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// ask runs Ask and checks the model-call count.
func ask(t *testing.T, f *fixture, req *orchestrate.Request, calls int) *orchestrate.Artifact {
	t.Helper()
	env, err := f.planner.Ask(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if a.Planner == nil || a.Planner.ModelCalls != calls {
		t.Errorf("planner = %+v, want %d model calls", a.Planner, calls)
	}
	return a
}

func TestOpenAI(t *testing.T) {
	t.Run("ask with tools: two calls", func(t *testing.T) {
		api := newFakeAPI(t, openAIToolCall("__planning__", validPlan), openAIText("Wrote post-abc-123."))
		f := newFixture(t, openAI(t, api, llm.Config{}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "Write a blog post about AI trends"}, 2)
		if !a.Success || a.Response != "Wrote post-abc-123." {
			t.Fatalf("status %s, response %q, errors %v", a.Status, a.Response, a.Errors)
		}
		if a.Planner.InputTokens != 2100 || a.Planner.OutputTokens != 120 || a.Planner.Model != "openai:gpt-test" {
			t.Errorf("planner = %+v", a.Planner)
		}
		b := api.body(0)
		if get(b, "tools", 0, "function", "name") != "__planning__" || get(b, "tools", 0, "function", "strict") != true {
			t.Errorf("tools = %v", get(b, "tools"))
		}
		if get(b, "tool_choice", "function", "name") != "__planning__" {
			t.Errorf("tool_choice = %v", get(b, "tool_choice"))
		}
		if get(b, "tools", 0, "function", "parameters", "additionalProperties") != false {
			t.Error("the strict schema is not closed")
		}
		if get(api.body(1), "tools") != nil {
			t.Error("the RESPOND call offers tools")
		}
	})
	t.Run("repair feeds the errors back", func(t *testing.T) {
		api := newFakeAPI(t, openAIToolCall("__planning__", invalidPlan), openAIToolCall("__planning__", validPlan))
		f := newFixture(t, openAI(t, api, llm.Config{}), fixtureOpts{})
		res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "blog"})
		if err != nil {
			t.Fatalf("%v %v", err, res.Issues)
		}
		msgs := get(api.body(1), "messages").([]any)
		last := msgs[len(msgs)-1]
		if get(last, "role") != "tool" || get(last, "tool_call_id") != "call_abc" || !strings.Contains(fmt.Sprint(get(last, "content")), "field_not_found") {
			t.Errorf("the second request ends with %v", last)
		}
		if get(msgs[len(msgs)-2], "tool_calls", 0, "function", "name") != "__planning__" {
			t.Errorf("the model's first answer is not in the second request: %v", msgs[len(msgs)-2])
		}
	})
	t.Run("429 with retry-after, then success", func(t *testing.T) {
		api := newFakeAPI(t, jsonReply(429, `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Retry-After", "0.01"),
			openAIToolCall("__planning__", `{"type":"direct_response","content":"hi","reasoning":null,"calls":null}`))
		f := newFixture(t, openAI(t, api, llm.Config{MaxRetries: 1}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "hi"}, 1)
		if !a.Success || a.Response != "hi" || api.count() != 2 {
			t.Errorf("status %s, response %q, %d HTTP requests", a.Status, a.Response, api.count())
		}
	})
	t.Run("429 after the retries fails the run", func(t *testing.T) {
		api := newFakeAPI(t, jsonReply(429, `{"error":{"message":"Rate limit reached","type":"requests"}}`, "Retry-After", "7"))
		f := newFixture(t, openAI(t, api, llm.Config{MaxRetries: -1}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "hi"}, 1)
		if a.Status != orchestrate.StatusFailed || a.Errors[0].Code != orchestrate.CodePlannerFailed ||
			!strings.Contains(a.Errors[0].Message, "rate limited (HTTP 429) (retry after 7s)") {
			t.Errorf("status %s, errors %v", a.Status, a.Errors)
		}
	})
	t.Run("a rejected strict schema is retried without strict", func(t *testing.T) {
		api := newFakeAPI(t, jsonReply(400, `{"error":{"message":"Invalid schema for function '__planning__'","type":"invalid_request_error"}}`),
			openAIToolCall("__planning__", validPlan))
		f := newFixture(t, openAI(t, api, llm.Config{MaxRetries: -1}), fixtureOpts{})
		res, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "blog"})
		if err != nil {
			t.Fatal(err)
		}
		if get(api.body(1), "tools", 0, "function", "strict") == true || res.Info.ModelCalls != 2 || res.Info.Attempts != 1 {
			t.Errorf("second request strict = %v, info %+v", get(api.body(1), "tools", 0, "function", "strict"), res.Info)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		api := newFakeAPI(t, blockReply)
		f := newFixture(t, openAI(t, api, llm.Config{MaxRetries: -1}), fixtureOpts{})
		env, _ := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "x", TimeoutMS: 100})
		if a := env.Artifact; a.Status != orchestrate.StatusFailed || a.Errors[0].Code != orchestrate.CodeTimeout {
			t.Errorf("status %s, errors %v", a.Status, a.Errors)
		}
	})
}

// A server that does not stream answers the streaming planning request
// with one JSON body: that body is the plan, and the planner does not ask
// for it again (one planning call, then the answer's).
func TestPlannerServerWithoutStreaming(t *testing.T) {
	for _, tc := range []struct {
		name string
		api  func(*fakeAPI) llm.Model
		plan reply
		text reply
	}{
		{"openai", func(api *fakeAPI) llm.Model { return openAI(t, api, llm.Config{}) }, openAIToolCall("__planning__", validPlan), openAIText("Wrote it.")},
		{"anthropic", func(api *fakeAPI) llm.Model { return anthropic(t, api, llm.Config{}) }, anthropicToolUse("__planning__", validPlan), anthropicText("Wrote it.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t, tc.plan, tc.text)
			api.plain = true
			f := newFixture(t, tc.api(api), fixtureOpts{})
			a := ask(t, f, &orchestrate.Request{Prompt: "Write a blog post about AI trends"}, 2)
			if !a.Success || a.Response != "Wrote it." || api.count() != 2 {
				t.Fatalf("status %s, response %q, %d requests (want 2: the plan, the answer), errors %v", a.Status, a.Response, api.count(), a.Errors)
			}
			if api.body(0)["stream"] != true {
				t.Errorf("the planning request has stream %v, want true", api.body(0)["stream"])
			}
			if a.Planner.ModelCalls != 2 {
				t.Errorf("the envelope counts %d model calls, want 2", a.Planner.ModelCalls)
			}
		})
	}
}

func TestAnthropic(t *testing.T) {
	t.Run("ask with tools: two calls", func(t *testing.T) {
		api := newFakeAPI(t, anthropicToolUse("__planning__", validPlan), anthropicText("Wrote post-abc-123."))
		f := newFixture(t, anthropic(t, api, llm.Config{}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "Write a blog post about AI trends"}, 2)
		if !a.Success || a.Response != "Wrote post-abc-123." || a.Planner.InputTokens != 2200 || a.Planner.OutputTokens != 120 {
			t.Fatalf("status %s, response %q, planner %+v, errors %v", a.Status, a.Response, a.Planner, a.Errors)
		}
		b := api.body(0)
		if get(b, "tools", 0, "name") != "__planning__" || get(b, "tools", 0, "strict") != true || get(b, "tools", 0, "input_schema", "type") != "object" {
			t.Errorf("tools = %v", get(b, "tools"))
		}
		if get(b, "tool_choice", "type") != "tool" || get(b, "tool_choice", "name") != "__planning__" {
			t.Errorf("tool_choice = %v", get(b, "tool_choice"))
		}
		if !strings.Contains(fmt.Sprint(get(b, "system")), "## research_blog") {
			t.Error("the system prompt does not list the tools")
		}
	})
	t.Run("repair feeds the errors back as a tool result", func(t *testing.T) {
		api := newFakeAPI(t, anthropicToolUse("__planning__", invalidPlan), anthropicToolUse("__planning__", validPlan))
		f := newFixture(t, anthropic(t, api, llm.Config{}), fixtureOpts{})
		if _, err := f.planner.Plan(t.Context(), &orchestrate.Request{Prompt: "blog"}); err != nil {
			t.Fatal(err)
		}
		msgs := get(api.body(1), "messages").([]any)
		block := get(msgs[len(msgs)-1], "content", 0)
		if get(block, "type") != "tool_result" || get(block, "tool_use_id") != "toolu_1" || !strings.Contains(fmt.Sprint(get(block, "content")), "field_not_found") {
			t.Errorf("the second request ends with %v", block)
		}
	})
	t.Run("direct response: one call", func(t *testing.T) {
		api := newFakeAPI(t, anthropicToolUse("__planning__", `{"type":"direct_response","content":"Hello!"}`))
		f := newFixture(t, anthropic(t, api, llm.Config{}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "hi"}, 1)
		if !a.Success || a.Response != "Hello!" || api.count() != 1 {
			t.Errorf("status %s, response %q, %d requests", a.Status, a.Response, api.count())
		}
	})
	t.Run("overloaded", func(t *testing.T) {
		api := newFakeAPI(t, jsonReply(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Retry-After", "3"))
		f := newFixture(t, anthropic(t, api, llm.Config{MaxRetries: -1}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "hi"}, 1)
		if a.Status != orchestrate.StatusFailed || !strings.Contains(a.Errors[0].Message, "rate limited (HTTP 529) (retry after 3s)") {
			t.Errorf("status %s, errors %v", a.Status, a.Errors)
		}
	})
	t.Run("server error", func(t *testing.T) {
		api := newFakeAPI(t, jsonReply(500, `{"type":"error","error":{"type":"api_error","message":"Internal error"}}`))
		f := newFixture(t, anthropic(t, api, llm.Config{MaxRetries: -1}), fixtureOpts{})
		a := ask(t, f, &orchestrate.Request{Prompt: "hi"}, 1)
		if a.Status != orchestrate.StatusFailed || a.Errors[0].Code != orchestrate.CodePlannerFailed || !strings.Contains(a.Errors[0].Message, "provider unavailable") {
			t.Errorf("status %s, errors %v", a.Status, a.Errors)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		api := newFakeAPI(t, blockReply)
		f := newFixture(t, anthropic(t, api, llm.Config{MaxRetries: -1}), fixtureOpts{})
		env, _ := f.planner.Run(t.Context(), &orchestrate.Request{Prompt: "x", TimeoutMS: 100})
		if a := env.Artifact; a.Status != orchestrate.StatusFailed || a.Errors[0].Code != orchestrate.CodeTimeout {
			t.Errorf("status %s, errors %v", a.Status, a.Errors)
		}
	})
}
