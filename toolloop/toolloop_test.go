package toolloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolloop"
)

func call(name string) llm.Response {
	return llm.Response{ToolCalls: []llm.ToolCall{{ID: "c", Name: name, Arguments: json.RawMessage(`{}`)}}, Usage: llm.Usage{InputTokens: 3, OutputTokens: 1}}
}

// The loop runs calls until the model answers, feeding every result back.
func TestLoopAnswers(t *testing.T) {
	m := llm.NewScripted([]llm.Response{call("a"), call("b"), {Text: " done "}})
	var ran []string
	res := (&toolloop.Loop{
		Generate: m.Generate, System: "sys", MaxTurns: 5,
		Tools: []llm.ToolDef{{Name: "a"}, {Name: "b"}},
		Call: func(ctx context.Context, tc llm.ToolCall) string {
			ran = append(ran, tc.Name)
			return "result of " + tc.Name
		},
	}).Run(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "goal"}})
	if res.Err != nil || res.Answer != "done" || res.Turns != 3 || res.Calls != 2 || res.Usage.InputTokens != 6 {
		t.Fatalf("result = %+v, err %v", res, res.Err)
	}
	if strings.Join(ran, ",") != "a,b" {
		t.Errorf("ran %v", ran)
	}
	last := m.Requests()[2]
	if got := last.Messages[len(last.Messages)-1]; got.Role != llm.RoleTool || got.Content != "result of b" {
		t.Errorf("the last result fed back = %+v", got)
	}
}

// A model that keeps calling tools gets a last turn with tools forbidden;
// if it still calls them, the loop ends with max_tool_steps.
func TestLoopMaxTurns(t *testing.T) {
	m := llm.NewScripted([]llm.Response{call("a"), call("a"), call("a")})
	res := (&toolloop.Loop{
		Generate: m.Generate, MaxTurns: 2, Tools: []llm.ToolDef{{Name: "a"}},
		Call: func(context.Context, llm.ToolCall) string { return "x" },
	}).Run(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "goal"}})
	if res.Err == nil || res.Err.Code != orchestrate.CodeMaxToolSteps || res.Calls != 2 {
		t.Fatalf("result = %+v, err %v", res, res.Err)
	}
	last := m.Requests()[2]
	if last.ToolChoice != llm.ToolChoiceNone || last.Messages[len(last.Messages)-1].Content != toolloop.FinalPrompt {
		t.Errorf("the last turn: tool_choice %q, last message %+v", last.ToolChoice, last.Messages[len(last.Messages)-1])
	}
}

// Calls beyond MaxCalls are not run; the model is told so.
func TestLoopMaxCalls(t *testing.T) {
	two := llm.Response{ToolCalls: []llm.ToolCall{{ID: "1", Name: "a"}, {ID: "2", Name: "a"}}}
	m := llm.NewScripted([]llm.Response{two, {Text: "ok"}})
	n := 0
	res := (&toolloop.Loop{
		Generate: m.Generate, MaxTurns: 5, MaxCalls: 1, Tools: []llm.ToolDef{{Name: "a"}},
		Call: func(context.Context, llm.ToolCall) string { n++; return "x" },
	}).Run(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "goal"}})
	if res.Err != nil || n != 1 || !strings.Contains(res.Messages[len(res.Messages)-1].Content, "limit of 1 tool calls") {
		t.Fatalf("ran %d, result %+v", n, res)
	}
}

// A model error ends the loop with model_error; a deadline with timeout.
func TestLoopModelErrors(t *testing.T) {
	boom := func(context.Context, *llm.Request) (*llm.Response, error) { return nil, errors.New("boom") }
	res := (&toolloop.Loop{Generate: boom}).Run(t.Context(), nil)
	if res.Err == nil || res.Err.Code != orchestrate.CodeModelError {
		t.Errorf("err = %v", res.Err)
	}
	late := func(context.Context, *llm.Request) (*llm.Response, error) { return nil, context.DeadlineExceeded }
	res = (&toolloop.Loop{Generate: late}).Run(t.Context(), nil)
	if res.Err == nil || res.Err.Code != orchestrate.CodeTimeout {
		t.Errorf("err = %v", res.Err)
	}
}

// A turn that asks for a client-final call runs its server calls, then
// pauses with the client's call; Resume appends every result in the
// model's order and asks the model again: no turn and no call runs twice.
func TestLoopHandoffAndResume(t *testing.T) {
	turn := llm.Response{ToolCalls: []llm.ToolCall{
		{ID: "1", Name: "read", Arguments: json.RawMessage(`{}`)},
		{ID: "2", Name: "apply", Arguments: json.RawMessage(`{"x":1}`)},
		{ID: "3", Name: "apply", Arguments: json.RawMessage(`{"bad":true}`)},
		{ID: "4", Name: "read", Arguments: json.RawMessage(`{}`)},
	}, Usage: llm.Usage{InputTokens: 5}}
	m := llm.NewScripted([]llm.Response{turn, {Text: "applied", Usage: llm.Usage{InputTokens: 7}}})
	var ran []string
	loop := &toolloop.Loop{
		Generate: m.Generate, MaxTurns: 5, Tools: []llm.ToolDef{{Name: "read"}, {Name: "apply"}},
		Call: func(_ context.Context, tc llm.ToolCall) string {
			ran = append(ran, tc.ID)
			return "read " + tc.ID
		},
		Handoff: func(_ context.Context, tc llm.ToolCall) (llm.ToolCall, string, bool) {
			if tc.Name != "apply" {
				return tc, "", false
			}
			if strings.Contains(string(tc.Arguments), "bad") {
				return tc, "error: bad is not allowed", true
			}
			return tc, "", true
		},
	}
	res := loop.Run(t.Context(), []llm.Message{{Role: llm.RoleUser, Content: "goal"}})
	st := res.Paused
	if res.Err != nil || st == nil || len(st.Pending) != 1 || st.Pending[0].ID != "2" || res.Answer != "" {
		t.Fatalf("result = %+v", res)
	}
	if strings.Join(ran, ",") != "1,4" || len(m.Requests()) != 1 || st.Calls != 3 {
		t.Fatalf("ran %v, %d model calls, state %+v", ran, len(m.Requests()), st)
	}
	// The state goes through JSON, as it is kept with a pause.
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back toolloop.State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Resume(t.Context(), &back, map[string]string{}); err == nil {
		t.Fatal("a resume without the pending result was accepted")
	}
	res, err = loop.Resume(t.Context(), &back, map[string]string{"2": "done"})
	if err != nil || res.Err != nil || res.Answer != "applied" || res.Turns != 2 || res.Usage.InputTokens != 12 {
		t.Fatalf("resumed = %+v, %v", res, err)
	}
	if strings.Join(ran, ",") != "1,4" || len(m.Requests()) != 2 {
		t.Fatalf("after the resume: ran %v, %d model calls", ran, len(m.Requests()))
	}
	msgs := m.Requests()[1].Messages
	var got []string
	for _, msg := range msgs[2:] {
		got = append(got, msg.ToolCallID+"="+msg.Content)
	}
	if want := "1=read 1,2=done,3=error: bad is not allowed,4=read 4"; strings.Join(got, ",") != want {
		t.Errorf("the results the model read: %v, want %s", got, want)
	}
}
