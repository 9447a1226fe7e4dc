package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// compactOf runs the request and returns the compact structured content of
// its result, decoded, with the result.
func compactOf(t *testing.T, te *testEngine, req string) (map[string]any, *mcp.CallToolResult, *Envelope) {
	t.Helper()
	env := te.Run(t.Context(), mustRequest(t, req))
	res := Result(env)
	var c map[string]any
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &c); err != nil {
		t.Fatal(err)
	}
	return c["artifact"].(map[string]any), res, env
}

// stepIDs returns the ids and statuses of the listed steps, children as
// "group/child".
func listed(steps any, prefix string) []string {
	var out []string
	for _, s := range steps.([]any) {
		m := s.(map[string]any)
		out = append(out, prefix+m["id"].(string)+":"+m["status"].(string))
		if ch, ok := m["children"]; ok {
			out = append(out, listed(ch, prefix+m["id"].(string)+"/")...)
		}
	}
	return out
}

func TestCompactCountsSucceededSteps(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	cont := `{"id":"bad","tool":"fail","arguments":{"message":"no"},"on_error":"continue"}`
	for _, tc := range []struct {
		name   string
		plan   string
		status string
		listed []string       // the steps the compact response lists
		counts map[string]any // its step_counts; nil: none
	}{
		{"every step succeeded, return",
			`{"steps":[{"id":"a","tool":"echo","arguments":{"x":1}},{"id":"b","tool":"echo","arguments":{"x":2}}],"return":"$b.output"}`,
			StatusSuccess, nil, map[string]any{"success": 2.0}},
		{"every step succeeded, answer",
			`{"steps":[{"id":"r","tool":"research","arguments":{"topic":"go"}}],"answer":"${r.output.title}"}`,
			StatusSuccess, nil, map[string]any{"success": 1.0}},
		{"a failure is listed in full",
			`{"steps":[` + cont + `,{"id":"a","tool":"echo","arguments":{"x":1}}],"return":"$a.output"}`,
			StatusPartial, []string{"bad:failed"}, map[string]any{"success": 1.0, "failed": 1.0}},
		{"a group is listed with the children that did not succeed",
			`{"steps":[{"id":"g","parallel":[` + cont + `,{"id":"ok","tool":"echo","arguments":{}}],"merge":"all_settled"},{"id":"a","tool":"echo","arguments":{}}],"return":"$a.output"}`,
			StatusPartial, []string{"g:partial", "g/bad:failed"}, map[string]any{"success": 2.0, "failed": 1.0}},
		{"skipped steps are listed",
			`{"steps":[{"id":"a","tool":"echo","arguments":{}},{"id":"s","when":"$a.output.nothing","tool":"echo","arguments":{}}],"return":"$a.output"}`,
			StatusSuccess, []string{"s:skipped"}, map[string]any{"success": 1.0, "skipped": 1.0}},
		{"without answer or return every step is listed",
			`{"steps":[{"id":"a","tool":"echo","arguments":{}},{"id":"b","tool":"echo","arguments":{}}]}`,
			StatusSuccess, []string{"a:success", "b:success"}, nil},
		{"an answer that did not render lists every step",
			`{"steps":[` + cont + `,{"id":"a","tool":"echo","arguments":{}}],"answer":"${bad.output.never}"}`,
			StatusPartial, []string{"bad:failed", "a:success"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			art, res, env := compactOf(t, te, `{"plan":`+tc.plan+`}`)
			if art["status"] != tc.status {
				t.Fatalf("status %v, want %s", art["status"], tc.status)
			}
			if diff := cmp.Diff(tc.listed, listed(art["steps"], "")); diff != "" {
				t.Errorf("listed steps (-want +got):\n%s", diff)
			}
			counts, _ := art["step_counts"].(map[string]any)
			if diff := cmp.Diff(tc.counts, counts); diff != "" {
				t.Errorf("step_counts (-want +got):\n%s", diff)
			}
			answered := tc.counts != nil
			for _, s := range art["steps"].([]any) {
				step := s.(map[string]any)
				if _, ok := step["output"]; ok && answered {
					t.Errorf("step %v brings its output beside the answer or result", step["id"])
				}
				if step["status"] == StatusFailed && (step["error"] == nil || step["duration_ms"] == nil) {
					t.Errorf("failed step %v lost its error or duration: %v", step["id"], step)
				}
			}
			// The record keeps every step.
			if n := len(env.Artifact.Steps); n < len(art["steps"].([]any)) || env.Artifact.Steps[0].ID == "" {
				t.Errorf("the envelope has %d steps", n)
			}
			full := te.Run(t.Context(), mustRequest(t, `{"plan":`+tc.plan+`,"response":"full"}`))
			var f map[string]any
			_ = json.Unmarshal(full.JSON(), &f)
			if _, ok := f["artifact"].(map[string]any)["step_counts"]; ok || len(full.Artifact.Steps) != len(env.Artifact.Steps) {
				t.Errorf("the full response counts steps or lists fewer than the plan has")
			}
			// The text block is the summary and the answer or result; an
			// old client also gets the JSON of the structured content.
			if text := res.Content[0].(*mcp.TextContent).Text; text != env.Text() {
				t.Errorf("text %q, want %q", text, env.Text())
			}
			old := ResultFor(env, "2025-03-26")
			if len(old.Content) != 2 || old.Content[1].(*mcp.TextContent).Text != string(old.StructuredContent.(json.RawMessage)) {
				t.Errorf("a 2025-03-26 client gets no JSON block equal to the structured content")
			}
		})
	}
}

func TestCompactDropsSettledWarnings(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	// echo declares no output schema: both references are unchecked. The
	// mustache warning is about what the plan did, not a check left open.
	plan := `{"steps":[{"id":"a","tool":"echo","arguments":{"v":"{{x}}"}},{"id":"b","tool":"echo","arguments":{"v":"$a.output.v"}}],"return":"$b.output.v"}`
	art, _, env := compactOf(t, te, `{"plan":`+plan+`}`)
	var codes, all []string
	for _, w := range art["warnings"].([]any) {
		codes = append(codes, w.(map[string]any)["code"].(string))
	}
	for _, w := range env.Artifact.Warnings {
		all = append(all, string(w.Code)+" "+w.Path)
	}
	if diff := cmp.Diff([]string{string(CodeMustache)}, codes); diff != "" {
		t.Errorf("compact warnings (-want +got):\n%s\nall: %v", diff, all)
	}
	if len(all) != 3 {
		t.Errorf("the envelope (the record's) has warnings %v, want the mustache one and two unchecked references", all)
	}

	// The same references, when the run fails, are what the caller needs.
	failing := `{"steps":[{"id":"a","tool":"echo","arguments":{}},{"id":"b","tool":"fail","arguments":{"message":"$a.output.v"}}],"return":"$a.output.v"}`
	art, _, _ = compactOf(t, te, `{"plan":`+failing+`}`)
	if ws, _ := art["warnings"].([]any); len(ws) != 2 {
		t.Errorf("after a failed run the compact response keeps %d warnings, want 2: %v", len(ws), ws)
	}
}

// BenchmarkCompactResult encodes the compact result of a 12-step run that
// succeeded, with a return value (the steps are counted) and without (the
// steps are listed with their outputs):
//
//	go test -run '^$' -bench CompactResult ./orchestrate/
func BenchmarkCompactResult(b *testing.B) {
	e := NewEngine(Options{Tools: noopCatalog(b)})
	for _, ret := range []bool{true, false} {
		req := chainPlan(b, 12)
		if ret {
			req.Plan.Return = "$s11.output"
		}
		env := e.Run(context.Background(), req)
		if !env.Artifact.Success {
			b.Fatalf("status %s", env.Artifact.Status)
		}
		b.Run(fmt.Sprintf("return=%v", ret), func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = len(Result(env).StructuredContent.(json.RawMessage))
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}

// Every compact response keeps the standard envelope's _metadata.tool_name
// and executed_at (seed 000), whatever the run came to, and matches the
// output schema agent_orchestrate publishes, which declares them.
func TestCompactKeepsStandardMetadata(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	lean, err := schemas.EnvelopeLean().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]string{
		"success":  `{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"x":1}}]}}`,
		"answered": `{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"x":1}}],"return":"$a.output"}}`,
		"failed":   `{"plan":{"steps":[{"id":"bad","tool":"fail","arguments":{"message":"no"}}]}}`,
		"invalid":  `{"plan":{"steps":[{"id":"a","tool":"no_such_tool","arguments":{}}]}}`,
		"dry run":  `{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{}}]},"dry_run":true}`,
		"paused":   `{"plan":{"steps":[{"id":"e","tool":"edit","arguments":{}}]},"client_tools":[{"name":"edit"}]}`,
		"no input": `{}`,
		"refused":  `{"plan":{"steps":[]},"timeout_ms":-1}`,
	} {
		t.Run(name, func(t *testing.T) {
			var env *Envelope
			if r, issues := decodeInput([]byte(req), jsongate.Default(1<<20)); len(issues) > 0 {
				env = te.Reject(t.Context(), issues)
			} else {
				env = te.Run(t.Context(), r)
			}
			var c map[string]any
			if err := json.Unmarshal(Result(env).StructuredContent.(json.RawMessage), &c); err != nil {
				t.Fatal(err)
			}
			m, _ := c["_metadata"].(map[string]any)
			if m["tool_name"] != "agent_orchestrate" {
				t.Errorf("_metadata.tool_name = %v, want agent_orchestrate", m["tool_name"])
			}
			if at, _ := m["executed_at"].(string); at == "" {
				t.Errorf("_metadata has no executed_at: %v", m)
			} else if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
				t.Errorf("executed_at %q: %v", at, err)
			}
			if err := lean.Validate(c); err != nil {
				t.Errorf("the compact envelope does not match the published output schema: %v", err)
			}
		})
	}
}

// A compact dry run answers with the normalised plan: seeing it is what a
// dry run is for.
func TestCompactDryRunKeepsPlan(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	art, _, env := compactOf(t, te, `{"plan":{"steps":[{"tool":"echo","arguments":{"x":1}},{"parallel":[{"tool":"echo","arguments":{}}]}]},"dry_run":true}`)
	if !env.Artifact.DryRun || !env.Artifact.Success {
		t.Fatalf("not a successful dry run: %+v", env.Artifact)
	}
	plan, _ := art["plan"].(map[string]any)
	steps, _ := plan["steps"].([]any)
	if len(steps) != 2 {
		t.Fatalf("the compact dry run has plan %v, want the normalised plan with 2 steps", art["plan"])
	}
	if id := steps[0].(map[string]any)["id"]; id != "0" {
		t.Errorf("the plan is not the normalised one: its first step's id is %v, want the default 0", id)
	}
	// A run that is not a dry run still leaves the plan out.
	art, _, _ = compactOf(t, te, `{"plan":{"steps":[{"tool":"echo","arguments":{"x":1}}]}}`)
	if _, ok := art["plan"]; ok {
		t.Errorf("a compact run echoes its plan")
	}
}

// The summary line counts in English: one problem, one tool step.
func TestSummaryCounts(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	for req, want := range map[string]string{
		`{"plan":{"steps":[{"id":"a","tool":"no_such_tool","arguments":{}}]}}`:                                       "The plan is invalid (1 problem); nothing ran.",
		`{"plan":{"steps":[{"id":"a","tool":"no_such_tool"},{"id":"b","tool":"nor_this"}]}}`:                         "The plan is invalid (2 problems); nothing ran.",
		`{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{}}]},"dry_run":true}`:                                "Dry run: the plan is valid (1 tool step); nothing ran.",
		`{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{}},{"tool":"echo","arguments":{}}]},"dry_run":true}`: "Dry run: the plan is valid (2 tool steps); nothing ran.",
	} {
		env := te.Run(t.Context(), mustRequest(t, req))
		if got, _, _ := strings.Cut(env.Summary(), "\n"); got != want {
			t.Errorf("%s:\nsummary %q\nwant    %q", req, got, want)
		}
	}
}
