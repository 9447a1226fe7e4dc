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
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}]}`)
}
