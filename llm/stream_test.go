package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/internal/fakeopenai"
	"github.com/orchestra-mcp/orchestra/llm"
)

// streamedPlan has what a streaming decoder must not get wrong: escapes,
// characters of several bytes (cut between chunks by the fakes), nesting.
const streamedPlan = `{"type":"tool_calls","calls":[{"tool_name":"echo","arguments":{"text":"caf\u00e9 \"quoted\" \\ 日本語 🎵","list":[1,{"a":[true,null]}]}}]}`

// collect gathers the deltas of a stream.
type collect struct {
	text string
	args map[int]string
	name map[int]string
}

func (c *collect) add(d llm.Delta) {
	if c.args == nil {
		c.args, c.name = map[int]string{}, map[int]string{}
	}
	c.text += d.Text
	c.args[d.Call] += d.Arguments
	if d.Name != "" {
		c.name[d.Call] = d.Name
	}
}

func TestOpenAIStreamMatchesGenerate(t *testing.T) {
	srv := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		rep := fakeopenai.Call("__planning__", streamedPlan)
		rep.Text = "Planning – ünïcode."
		rep.Piece = 3
		rep.InputTokens, rep.OutputTokens = 120, 33
		return rep
	})
	m, err := llm.New(llm.Config{Provider: "openai", Model: "gpt-test", BaseURL: srv.URL()}, llm.Options{Getenv: env()})
	if err != nil {
		t.Fatal(err)
	}
	sm, ok := m.(llm.StreamModel)
	if !ok {
		t.Fatalf("the OpenAI model does not stream")
	}
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Tools: []llm.ToolDef{planningTool}, ToolChoice: "__planning__"}
	want, err := m.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var c collect
	got, err := sm.GenerateStream(t.Context(), req, c.add)
	if err != nil {
		t.Fatal(err)
	}
	// The ids differ by request (call_1_0, call_2_0); the rest must not.
	if len(got.ToolCalls) == 1 && len(want.ToolCalls) == 1 {
		got.ToolCalls[0].ID = want.ToolCalls[0].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed response (-generate +stream):\n%s", diff)
	}
	if c.args[0] != streamedPlan || c.name[0] != "__planning__" || c.text != want.Text {
		t.Errorf("deltas: text %q, call %q %q", c.text, c.name[0], c.args[0])
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Stream || !reqs[1].Stream {
		t.Errorf("stream flags of the requests: %+v", reqs)
	}
}

// anthropicSSE answers as the Messages API streams anthropicToolAnswer:
// its text and its tool call's input (streamedPlan) cut in pieces.
func anthropicSSE(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ string, v map[string]any) {
		v["type"] = typ
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		w.(http.Flusher).Flush()
	}
	ev("message_start", map[string]any{"message": map[string]any{"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test-1",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 200, "output_tokens": 1}}})
	ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for _, p := range []string{"Plan", "ning."} {
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": p}})
	}
	ev("content_block_stop", map[string]any{"index": 0})
	ev("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "__planning__", "input": map[string]any{}}})
	for r := []rune(streamedPlan); len(r) > 0; {
		k := min(5, len(r))
		ev("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(r[:k])}})
		r = r[k:]
	}
	ev("content_block_stop", map[string]any{"index": 1})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 40}})
	ev("message_stop", map[string]any{})
}

func TestAnthropicStreamMatchesGenerate(t *testing.T) {
	var plan map[string]any
	if err := json.Unmarshal([]byte(streamedPlan), &plan); err != nil {
		t.Fatal(err)
	}
	answer := strings.Replace(anthropicToolAnswer, `{"type":"direct_response","content":"hi"}`, streamedPlan, 1)
	f := newFakeAPI(t, jsonReply(200, answer), func(w http.ResponseWriter, r *http.Request) { anthropicSSE(w, r) })
	m := newAnthropic(t, f, llm.Config{}, env("ANTHROPIC_API_KEY", "k"))
	sm, ok := m.(llm.StreamModel)
	if !ok {
		t.Fatalf("the Anthropic model does not stream")
	}
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Tools: []llm.ToolDef{planningTool}, ToolChoice: "__planning__"}
	want, err := m.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var c collect
	got, err := sm.GenerateStream(t.Context(), req, c.add)
	if err != nil {
		t.Fatal(err)
	}
	// Generate keeps the input as the API encoded it; compare the values.
	norm := func(r *llm.Response) {
		for i := range r.ToolCalls {
			var v any
			if err := json.Unmarshal(r.ToolCalls[i].Arguments, &v); err != nil {
				t.Fatalf("arguments %s: %v", r.ToolCalls[i].Arguments, err)
			}
			r.ToolCalls[i].Arguments, _ = json.Marshal(v)
		}
	}
	norm(want)
	norm(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed response (-generate +stream):\n%s", diff)
	}
	if c.args[0] != streamedPlan || c.name[0] != "__planning__" || c.text != "Planning." {
		t.Errorf("deltas: text %q, call %q %q", c.text, c.name[0], c.args[0])
	}
	if body := f.body(1); body["stream"] != true {
		t.Errorf("the streamed request has stream = %v", body["stream"])
	}
}

func TestScriptedStreamPieces(t *testing.T) {
	s := llm.NewScripted([]llm.Response{{Text: "t", ToolCalls: []llm.ToolCall{{Name: "__planning__", Arguments: json.RawMessage(streamedPlan)}}}})
	var before []string
	sm := s.Streaming(llm.StreamScript{Before: func(ctx context.Context, call, piece int) error {
		before = append(before, fmt.Sprint(call, ":", piece))
		return nil
	}})
	var c collect
	resp, err := sm.GenerateStream(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, c.add)
	if err != nil {
		t.Fatal(err)
	}
	if c.args[0] != streamedPlan || string(resp.ToolCalls[0].Arguments) != streamedPlan || c.text != "t" {
		t.Errorf("deltas %q, response %s", c.args[0], resp.ToolCalls[0].Arguments)
	}
	if n := (len(streamedPlan) + 15) / 16; len(before) != n {
		t.Errorf("Before ran %d times, want one per 16-byte piece (%d)", len(before), n)
	}
}

// A server that ignores stream and answers with one JSON body is an error
// the caller can tell (it then asks without streaming).
func TestStreamAnsweredWithoutEvents(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			body := anthropicAnswer
			if provider == "openai" {
				body = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}]}`
			}
			f := newFakeAPI(t, jsonReply(200, body))
			cfg := llm.Config{Provider: provider, Model: "m", BaseURL: f.URL}
			if provider == "openai" {
				cfg.BaseURL += "/v1"
			}
			m, err := llm.New(cfg, llm.Options{Getenv: env("OPENAI_API_KEY", "k", "ANTHROPIC_API_KEY", "k")})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.(llm.StreamModel).GenerateStream(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, func(llm.Delta) {})
			if !errors.Is(err, llm.ErrBadResponse) || !strings.Contains(err.Error(), "no events") {
				t.Errorf("err = %v, want a bad response with no events", err)
			}
		})
	}
}
