package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/llm"
)

var stateKey = []byte("test-key-0123456789abcdef")

// planTool is a tool handler that samples calls times through the client,
// the way the planner does, and returns the responses as JSON text.
func planTool(calls int, invocations *atomic.Int32) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		invocations.Add(1)
		m, err := llm.SamplingFor(req, stateKey, llm.SamplingOptions{})
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			return res, nil
		}
		var out []*llm.Response
		for i := range calls {
			resp, err := m.Generate(ctx, &llm.Request{
				System:     "Plan.",
				Messages:   []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("attempt %d", i+1)}},
				Tools:      []llm.ToolDef{planningTool},
				ToolChoice: "__planning__",
			})
			if errors.Is(err, llm.ErrInputRequired) {
				return m.(*llm.InputSampling).InputResult()
			}
			if err != nil {
				res := &mcp.CallToolResult{}
				res.SetError(err)
				return res, nil
			}
			out = append(out, resp)
		}
		b, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
}

func connect(t *testing.T, protocol string, copts *mcp.ClientOptions, h mcp.ToolHandler) *mcp.ClientSession {
	t.Helper()
	ctx := t.Context()
	server := mcp.NewServer(&mcp.Implementation{Name: "server", Version: "0"}, nil)
	server.AddTool(&mcp.Tool{Name: "plan", InputSchema: map[string]any{"type": "object"}}, h)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "0"}, copts)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callPlan(t *testing.T, cs *mcp.ClientSession, args map[string]any) []llm.Response {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plan", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("tool error: %s", text)
	}
	var out []llm.Response
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	return out
}

func TestSamplingWithTools(t *testing.T) {
	var (
		mu  sync.Mutex
		got []*mcp.CreateMessageWithToolsParams
		inv atomic.Int32
	)
	cs := connect(t, "2025-11-25", &mcp.ClientOptions{
		CreateMessageWithToolsHandler: func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
			return &mcp.CreateMessageWithToolsResult{
				Model: "client-model", Role: "assistant", StopReason: "toolUse",
				Content: []mcp.Content{&mcp.ToolUseContent{ID: "tu_1", Name: "__planning__", Input: map[string]any{"type": "direct_response", "content": "hi"}}},
			}, nil
		},
	}, planTool(1, &inv))
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	out := callPlan(t, cs, nil)
	if len(out) != 1 || len(out[0].ToolCalls) != 1 || out[0].Model != "client-model" || out[0].StopReason != llm.StopToolUse {
		t.Fatalf("responses = %+v", out)
	}
	tc := out[0].ToolCalls[0]
	if tc.ID != "tu_1" || tc.Name != "__planning__" || string(tc.Arguments) != `{"content":"hi","type":"direct_response"}` {
		t.Errorf("tool call = %+v (%s)", tc, tc.Arguments)
	}
	p := got[0]
	if p.SystemPrompt != "Plan." || len(p.Tools) != 1 || p.Tools[0].Name != "__planning__" || p.ToolChoice == nil || p.ToolChoice.Mode != "required" {
		t.Errorf("client got system %q, tools %v, choice %+v", p.SystemPrompt, p.Tools, p.ToolChoice)
	}
	if p.MaxTokens != llm.DefaultMaxTokens {
		t.Errorf("maxTokens = %d", p.MaxTokens)
	}
}

func TestSamplingJSONInText(t *testing.T) {
	var (
		got *mcp.CreateMessageParams
		inv atomic.Int32
	)
	cs := connect(t, "2025-11-25", &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			got = req.Params
			return &mcp.CreateMessageResult{
				Model: "client-model", Role: "assistant", StopReason: "endTurn",
				Content: &mcp.TextContent{Text: "Here it is:\n```json\n{\"type\": \"direct_response\", \"content\": \"hi\"}\n```"},
			}, nil
		},
	}, planTool(1, &inv))
	out := callPlan(t, cs, nil)
	if len(out) != 1 || len(out[0].ToolCalls) != 1 || out[0].Text != "" {
		t.Fatalf("responses = %+v", out)
	}
	tc := out[0].ToolCalls[0]
	if tc.Name != "__planning__" || string(tc.Arguments) != `{"type":"direct_response","content":"hi"}` {
		t.Errorf("tool call = %+v (%s)", tc, tc.Arguments)
	}
	for _, s := range []string{"Plan.", `"__planning__"`, `"additionalProperties":false`, "You must call a tool."} {
		if !strings.Contains(got.SystemPrompt, s) {
			t.Errorf("system prompt lacks %q:\n%s", s, got.SystemPrompt)
		}
	}
}

func TestSamplingMultiRoundTrip(t *testing.T) {
	var (
		inv, asked atomic.Int32
	)
	cs := connect(t, "", &mcp.ClientOptions{
		CreateMessageWithToolsHandler: func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			n := asked.Add(1)
			user := req.Params.Messages[0].Content[0].(*mcp.TextContent).Text
			return &mcp.CreateMessageWithToolsResult{
				Model: "client-model", Role: "assistant", StopReason: "toolUse",
				Content: []mcp.Content{&mcp.ToolUseContent{ID: fmt.Sprint("tu_", n), Name: "__planning__", Input: map[string]any{"type": "direct_response", "content": user}}},
			}, nil
		},
	}, planTool(2, &inv))
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want the multi round-trip protocol", v)
	}
	out := callPlan(t, cs, map[string]any{"goal": "x"})
	if len(out) != 2 {
		t.Fatalf("responses = %+v", out)
	}
	for i, r := range out {
		want := fmt.Sprintf(`{"content":"attempt %d","type":"direct_response"}`, i+1)
		if len(r.ToolCalls) != 1 || string(r.ToolCalls[0].Arguments) != want {
			t.Errorf("response %d = %+v, want arguments %s", i+1, r, want)
		}
	}
	if asked.Load() != 2 || inv.Load() != 3 {
		t.Errorf("client sampled %d times, handler ran %d times; want 2 and 3", asked.Load(), inv.Load())
	}
}

func TestSamplingStateCannotBeForged(t *testing.T) {
	var inv atomic.Int32
	cs := connect(t, "", &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		CreateMessageWithToolsHandler: func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return nil, errors.New("not called")
		},
	}, planTool(1, &inv))
	ctx := t.Context()
	args := map[string]any{"goal": "x"}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.InputRequests) != 1 || first.RequestState == "" {
		t.Fatalf("first result = %+v", first)
	}
	var id string
	for k := range first.InputRequests {
		id = k
	}
	answer := mcp.InputResponseMap{id: &mcp.CreateMessageWithToolsResult{Model: "m", Role: "assistant",
		Content: []mcp.Content{&mcp.ToolUseContent{ID: "x", Name: "__planning__", Input: map[string]any{"type": "forged"}}}}}
	body, sig, _ := cut(first.RequestState)
	tampered := llm.SignState([]byte("attacker key 0123456789"), []byte(`{"args":"","rounds":[]}`))
	for name, p := range map[string]*mcp.CallToolParams{
		"altered signature": {Name: "plan", Arguments: args, InputResponses: answer, RequestState: body + "." + sig[:len(sig)-2] + "AA"},
		"other key":         {Name: "plan", Arguments: args, InputResponses: answer, RequestState: tampered},
		"other arguments":   {Name: "plan", Arguments: map[string]any{"goal": "y"}, InputResponses: answer, RequestState: first.RequestState},
		"no answer":         {Name: "plan", Arguments: args, RequestState: first.RequestState},
	} {
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !res.IsError {
			t.Errorf("%s: accepted: %+v", name, res)
		}
	}
	// The genuine state with an answer completes.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan", Arguments: args, InputResponses: answer, RequestState: first.RequestState})
	if err != nil || res.IsError {
		t.Fatalf("genuine state: %+v, %v", res, err)
	}
}

func TestSamplingUnsupported(t *testing.T) {
	var inv atomic.Int32
	for _, protocol := range []string{"2025-11-25", ""} {
		cs := connect(t, protocol, nil, planTool(1, &inv))
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plan"})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.Contains(text, "does not support sampling") || !strings.Contains(text, "planner") {
			t.Errorf("protocol %q: %s", protocol, text)
		}
	}
}

func TestResponseFromSamplingText(t *testing.T) {
	req := &llm.Request{Tools: []llm.ToolDef{{Name: "search"}, {Name: "fetch"}}}
	res := &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: `{"tool": "fetch", "arguments": {"url": "u"}}`}, StopReason: "endTurn"}
	resp, err := llm.ResponseFromSampling(req, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "fetch" || string(resp.ToolCalls[0].Arguments) != `{"url": "u"}` {
		t.Errorf("response = %+v", resp)
	}
	res.Content = &mcp.TextContent{Text: "Just an answer."}
	if resp, _ := llm.ResponseFromSampling(req, res); len(resp.ToolCalls) != 0 || resp.Text != "Just an answer." || resp.StopReason != llm.StopEndTurn {
		t.Errorf("plain text = %+v", resp)
	}
	req.ToolChoice = llm.ToolChoiceNone
	res.Content = &mcp.TextContent{Text: `{"tool": "fetch", "arguments": {}}`}
	if resp, _ := llm.ResponseFromSampling(req, res); len(resp.ToolCalls) != 0 {
		t.Errorf("tool call read although tools were forbidden: %+v", resp)
	}
}

func TestCreateMessageParamsHistory(t *testing.T) {
	p, err := llm.CreateMessageWithToolsParams(&llm.Request{
		Messages: []llm.Message{
			{Role: "user", Content: "go"},
			{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "a", Name: "search", Arguments: json.RawMessage(`{"q":1}`)}}},
			{Role: "tool", ToolCallID: "a", Content: "found"},
		},
		Tools: []llm.ToolDef{{Name: "search"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 3 {
		t.Fatalf("messages = %d", len(p.Messages))
	}
	if tu, ok := p.Messages[1].Content[0].(*mcp.ToolUseContent); !ok || tu.ID != "a" || tu.Input["q"] != 1.0 {
		t.Errorf("assistant content = %#v", p.Messages[1].Content[0])
	}
	if tr, ok := p.Messages[2].Content[0].(*mcp.ToolResultContent); !ok || tr.ToolUseID != "a" {
		t.Errorf("tool result content = %#v", p.Messages[2].Content[0])
	}
	tp, err := llm.CreateMessageParams(&llm.Request{Messages: []llm.Message{
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "a", Name: "search", Arguments: json.RawMessage(`{"q":1}`)}}},
		{Role: "tool", ToolCallID: "a", Content: "found"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Messages[0].Content.(*mcp.TextContent).Text; got != `{"arguments":{"q":1},"tool":"search"}` {
		t.Errorf("assistant text = %s", got)
	}
	if got := tp.Messages[1].Content.(*mcp.TextContent).Text; !strings.Contains(got, "found") || tp.Messages[1].Role != "user" {
		t.Errorf("tool text = %s", got)
	}
}
