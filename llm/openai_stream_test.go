//go:build !no_openai

package llm_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

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

func TestOpenAIStreamAnsweredWithoutEvents(t *testing.T) {
	testAnsweredWithoutEvents(t, llm.Config{Provider: "openai", BaseURL: "/v1"},
		`{"id":"c","object":"chat.completion","created":1,"model":"m","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17},`+
			`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"hi","tool_calls":[`+
			`{"id":"call_1","type":"function","function":{"name":"__planning__","arguments":"{\"type\":\"tool_calls\",\"calls\":[]}"}}]}}]}`)
}

// TestOpenAIAnswerReadThroughLimit: a server that answers without end,
// streamed or not, is read only up to max_response_bytes (the stream up to
// 16 times that, for its events' own fields).
func TestOpenAIAnswerReadThroughLimit(t *testing.T) {
	const limit = 64 << 10
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Tools: []llm.ToolDef{planningTool}}
	t.Run("unstreamed", func(t *testing.T) {
		sent := make(chan int64, 8)
		srv := newFakeAPI(t, endlessReply("application/json", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`, "x", sent))
		m, err := llm.New(llm.Config{Provider: "openai", Model: "m", BaseURL: srv.URL + "/v1", MaxResponseBytes: limit}, llm.Options{Getenv: env()})
		if err != nil {
			t.Fatal(err)
		}
		checkReadThroughLimit(t, srv, func() error { _, err := m.Generate(t.Context(), req); return err }, sent, 64<<20)
	})
	for _, tc := range []struct{ name, piece string }{
		{"streamed text", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]}` + "\n\n"},
		{"streamed arguments", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"__planning__","arguments":"{\"steps\":[{\"tool\":\"x\"},{\"tool\":\"x\"},{\"tool\":\"x\"},{\"tool\":\"x\"},{\"tool\":\"x\"},"}}]}}]}` + "\n\n"},
		{"streamed without content", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{}}]}` + "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan int64, 8)
			srv := newFakeAPI(t, endlessReply("text/event-stream", "", tc.piece, sent))
			m, err := llm.New(llm.Config{Provider: "openai", Model: "m", BaseURL: srv.URL + "/v1", MaxResponseBytes: limit}, llm.Options{Getenv: env()})
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
