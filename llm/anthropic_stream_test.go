//go:build !no_anthropic

package llm_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/llm"
)

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

func TestAnthropicStreamAnsweredWithoutEvents(t *testing.T) {
	testAnsweredWithoutEvents(t, llm.Config{Provider: "anthropic"}, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-1",`+
		`"content":[{"type":"text","text":"Planning."},{"type":"tool_use","id":"toolu_1","name":"__planning__","input":{"type":"tool_calls","calls":[]}}],`+
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2}}`)
}

// TestAnthropicAnswerReadThroughLimit: as TestOpenAIAnswerReadThroughLimit,
// for the Messages API.
func TestAnthropicAnswerReadThroughLimit(t *testing.T) {
	const limit = 64 << 10
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Tools: []llm.ToolDef{planningTool}}
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
	t.Run("unstreamed", func(t *testing.T) {
		sent := make(chan int64, 8)
		srv := newFakeAPI(t, endlessReply("application/json", `{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"`, "x", sent))
		m, err := llm.New(llm.Config{Provider: "anthropic", Model: "m", BaseURL: srv.URL, MaxResponseBytes: limit}, llm.Options{Getenv: env("ANTHROPIC_API_KEY", "k")})
		if err != nil {
			t.Fatal(err)
		}
		checkReadThroughLimit(t, srv, func() error { _, err := m.Generate(t.Context(), req); return err }, sent, 64<<20)
	})
	for _, tc := range []struct{ name, head, piece string }{
		{"streamed text", start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}\n\n"},
		{"streamed arguments", start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"__planning__\",\"input\":{}}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"steps\\\":[{\\\"tool\\\":\\\"x\\\"},{\\\"tool\\\":\\\"x\\\"},\"}}\n\n"},
		{"streamed pings", start, "event: ping\ndata: {\"type\":\"ping\"}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan int64, 8)
			srv := newFakeAPI(t, endlessReply("text/event-stream", tc.head, tc.piece, sent))
			m, err := llm.New(llm.Config{Provider: "anthropic", Model: "m", BaseURL: srv.URL, MaxResponseBytes: limit}, llm.Options{Getenv: env("ANTHROPIC_API_KEY", "k")})
			if err != nil {
				t.Fatal(err)
			}
			sm := m.(llm.StreamModel)
			checkReadThroughLimit(t, srv, func() error {
				_, err := sm.GenerateStream(t.Context(), req, func(llm.Delta) {})
				return err
			}, sent, 64<<20)
		})
	}
}
