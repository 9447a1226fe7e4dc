package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// A server that ignores stream and answers with one JSON body has answered:
// the stream returns what Generate would, hands the answer to onDelta
// whole, and asks once.
func testAnsweredWithoutEvents(t *testing.T, cfg llm.Config, body string) {
	t.Helper()
	f := newFakeAPI(t, jsonReply(200, body))
	cfg.Model, cfg.BaseURL = "m", f.URL+cfg.BaseURL
	m, err := llm.New(cfg, llm.Options{Getenv: env("OPENAI_API_KEY", "k", "ANTHROPIC_API_KEY", "k")})
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}
	var c collect
	got, err := m.(llm.StreamModel).GenerateStream(t.Context(), req, c.add)
	if err != nil {
		t.Fatalf("a JSON body answering a streaming request: %v", err)
	}
	if n := f.count(); n != 1 {
		t.Errorf("%d requests, want the one streaming request", n)
	}
	want, err := m.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the answer from the body (-generate +stream):\n%s", diff)
	}
	if len(got.ToolCalls) == 0 || c.name[0] != got.ToolCalls[0].Name || c.args[0] != string(got.ToolCalls[0].Arguments) || c.text != got.Text {
		t.Errorf("deltas: text %q, calls %v %v; the answer has text %q, calls %+v", c.text, c.name, c.args, got.Text, got.ToolCalls)
	}
}
