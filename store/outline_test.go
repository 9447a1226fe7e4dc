package store

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestListFilters lists runs by text, time, root and parent, with the
// scope and status filters, on every database.
func TestListFilters(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		clk := newClock()
		s := openTest(t, path, Options{Now: clk.Now})
		t0 := clk.Now()
		for i, r := range []Run{
			{ExecID: "r1", Tool: "cli", Owner: "alice", UserID: "alice", Goal: "Summarize the 50% SALES report"},
			{ExecID: "r2", Tool: "agent_orchestrate", Owner: "bob", UserID: "bob", FirstStep: "fetch (http_request)"},
			{ExecID: "r2-agent", Tool: "agent__writer", Owner: "bob", UserID: "bob", ParentExecID: "r2"},
			{ExecID: "r3", Tool: "cli", Owner: "alice", UserID: "alice", FirstStep: "under_score (json_query)"},
		} {
			r.StartedAt = t0.Add(time.Duration(i) * time.Minute)
			if err := s.StartRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		env := json.RawMessage(`{"artifact":{"errors":[{"code":"tool_error","message":"Upstream said NO"}]}}`)
		if err := s.FinishRun(ctx, "r3", StatusFailed, env, time.Time{}, 0); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			opts ListOptions
			want []string
		}{
			{"everything", ListOptions{}, []string{"r3", "r2-agent", "r2", "r1"}},
			{"roots", ListOptions{Roots: true}, []string{"r3", "r2", "r1"}},
			{"children of r2", ListOptions{Parent: "r2"}, []string{"r2-agent"}},
			{"goal, any case", ListOptions{Text: "sales"}, []string{"r1"}},
			{"percent is literal", ListOptions{Text: "50%"}, []string{"r1"}},
			{"percent matches nothing else", ListOptions{Text: "%"}, []string{"r1"}},
			{"underscore is literal", ListOptions{Text: "r2_"}, nil},
			{"underscore in a first step", ListOptions{Text: "under_score"}, []string{"r3"}},
			{"first step", ListOptions{Text: "HTTP_REQUEST"}, []string{"r2"}},
			{"error", ListOptions{Text: "said no"}, []string{"r3"}},
			{"tool", ListOptions{Text: "writer"}, []string{"r2-agent"}},
			{"exec id", ListOptions{Text: "r2-"}, []string{"r2-agent"}},
			{"user", ListOptions{Text: "bob", Roots: true}, []string{"r2"}},
			{"since", ListOptions{Since: t0.Add(time.Minute)}, []string{"r3", "r2-agent", "r2"}},
			{"until", ListOptions{Until: t0.Add(time.Minute)}, []string{"r1"}},
			{"since and until", ListOptions{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, []string{"r2-agent", "r2"}},
			{"scope", ListOptions{Scope: OwnerScope("alice")}, []string{"r3", "r1"}},
			{"scope and text", ListOptions{Scope: OwnerScope("bob"), Text: "sales"}, nil},
			{"status and text", ListOptions{Status: StatusFailed, Text: "no"}, []string{"r3"}},
		} {
			if got := listIDs(t, s, tc.opts); !cmp.Equal(got, tc.want) {
				t.Errorf("%s: List(%+v) = %v, want %v", tc.name, tc.opts, got, tc.want)
			}
		}

		// Pages of a filtered list continue within the filter.
		page, next, err := s.List(ctx, ListOptions{Roots: true, Limit: 2})
		if err != nil || len(page) != 2 || next == "" {
			t.Fatalf("first page = %d runs, next %q, %v; want 2 and a cursor", len(page), next, err)
		}
		if got := listIDs(t, s, ListOptions{Roots: true, Limit: 2, Cursor: next}); !cmp.Equal(got, []string{"r1"}) {
			t.Errorf("second page of roots = %v, want [r1]", got)
		}

		if _, _, err := s.List(ctx, ListOptions{Text: strings.Repeat("x", MaxListText+1)}); err == nil ||
			!strings.Contains(err.Error(), "at most 256") {
			t.Errorf("a text filter of %d bytes: %v, want an error naming the limit", MaxListText+1, err)
		}
	})
}

// TestViewerColumns keeps a run's goal, first step and tokens, and a
// step's kind and arguments, and reads a run in outline, one step whole,
// and its pauses, within scope, on every database.
func TestViewerColumns(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		if err := s.StartRun(ctx, Run{ExecID: "e", Tool: "cli", Owner: "alice", Goal: "count fruit", FirstStep: "a (json_query)",
			Plan: json.RawMessage(`{"steps":[]}`)}); err != nil {
			t.Fatal(err)
		}
		step := StepRecord{ExecID: "e", StepID: "a", Kind: "agent", Tool: "agent__counter", Status: "success", Attempts: 1,
			StartedAt: time.Now(), DurationMS: 7,
			Arguments: json.RawMessage(`{"user_query":"how many?"}`), Output: json.RawMessage(`{"big":"output"}`),
			Error: json.RawMessage(`{"code":"x","message":"y"}`)}
		if err := s.RecordStep(ctx, step); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordStep(ctx, StepRecord{ExecID: "e", StepID: "b", Index: 1, Kind: "tool", Tool: "render", Status: "running"}); err != nil {
			t.Fatal(err)
		}
		env := json.RawMessage(`{"artifact":{"status":"success","planner":{"input_tokens":100,"output_tokens":10},
			"agents":{"tokens_in":20,"tokens_out":2},
			"steps":[{"type":"model","output":{"tokens_in":3,"tokens_out":1}},{"type":"tool","output":{"tokens_in":1000}},
				{"type":"for_each","output":[1,2]},{"type":"tool","output":"text"},{"type":"tool","output":null}]}}`)
		if err := s.FinishRun(ctx, "e", StatusSuccess, env, time.Time{}, 0); err != nil {
			t.Fatal(err)
		}

		run, err := s.RunIn(ctx, OwnerScope("alice"), "e")
		if err != nil {
			t.Fatal(err)
		}
		if run.Goal != "count fruit" || run.FirstStep != "a (json_query)" || run.TokensIn != 123 || run.TokensOut != 13 {
			t.Errorf("RunIn = goal %q, first step %q, tokens %d/%d; want count fruit, a (json_query), 123/13",
				run.Goal, run.FirstStep, run.TokensIn, run.TokensOut)
		}
		if len(run.Plan) == 0 || len(run.Envelope) == 0 {
			t.Errorf("RunIn left out the plan (%d bytes) or the envelope (%d bytes)", len(run.Plan), len(run.Envelope))
		}
		runs, _, err := s.List(ctx, ListOptions{})
		if err != nil || len(runs) != 1 || runs[0].Goal != "count fruit" || runs[0].TokensIn != 123 {
			t.Errorf("List = %+v, %v; want the run with its goal and tokens", runs, err)
		}

		outline, steps, err := s.OutlineIn(ctx, OwnerScope("alice"), "e")
		if err != nil {
			t.Fatal(err)
		}
		if len(outline.Plan) != 0 || len(outline.Envelope) != 0 {
			t.Errorf("OutlineIn read the plan or the envelope")
		}
		if len(steps) != 2 || steps[0].Kind != "agent" || steps[0].Output != nil || steps[0].Arguments != nil ||
			string(steps[0].Error) != `{"code":"x","message":"y"}` || steps[1].Kind != "tool" {
			t.Errorf("OutlineIn steps = %+v; want a and b with kinds and a's error, without bodies", steps)
		}

		got, err := s.StepIn(ctx, OwnerScope("alice"), "e", "a")
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Arguments) != `{"user_query":"how many?"}` || string(got.Output) != `{"big":"output"}` || got.DurationMS != 7 {
			t.Errorf("StepIn = %+v; want a with its arguments and output", got)
		}
		if _, err := s.StepIn(ctx, OwnerScope("alice"), "e", "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("StepIn of a missing step: %v, want ErrNotFound", err)
		}
		_, full, err := s.GetIn(ctx, Scope{}, "e")
		if err != nil || string(full[0].Arguments) != `{"user_query":"how many?"}` || full[0].Kind != "agent" {
			t.Errorf("GetIn steps = %+v, %v; want kinds and arguments", full, err)
		}

		// Another owner sees none of it.
		bob := OwnerScope("bob")
		if _, err := s.RunIn(ctx, bob, "e"); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's RunIn: %v, want ErrNotFound", err)
		}
		if _, _, err := s.OutlineIn(ctx, bob, "e"); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's OutlineIn: %v, want ErrNotFound", err)
		}
		if _, err := s.StepIn(ctx, bob, "e", "a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's StepIn: %v, want ErrNotFound", err)
		}
		if _, err := s.PausesIn(ctx, bob, "e"); !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's PausesIn: %v, want ErrNotFound", err)
		}
		if p, err := s.PausesIn(ctx, OwnerScope("alice"), "e"); err != nil || len(p) != 0 {
			t.Errorf("alice's PausesIn = %v, %v; want none", p, err)
		}
	})
}

// TestTokensFromAnAgentRun counts the model turns of an agent's run, and
// nothing for an envelope that names no tokens.
func TestTokensFromEnvelopes(t *testing.T) {
	for in, want := range map[string][2]int64{
		`{"artifact":{"steps":[{"type":"model","output":{"tokens_in":5,"tokens_out":2}},{"type":"model","output":{"tokens_in":7,"tokens_out":1}}]}}`: {12, 3},
		`{"artifact":{"steps":[{"type":"tool","output":{"text":"no tokens here"}}]}}`:                                                                {0, 0},
		`{"artifact":{"planner":{"input_tokens":9,"output_tokens":4}}}`:                                                                              {9, 4},
		`not json, but tokens`: {0, 0},
	} {
		f := readEnvelope(json.RawMessage(in), false)
		if got := [2]int64{f.tokensIn, f.tokensOut}; got != want {
			t.Errorf("readEnvelope(%s) tokens = %v, want %v", in, got, want)
		}
	}
}
