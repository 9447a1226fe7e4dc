package orchestrate

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestAnswerAndReturnRendered(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"r","tool":"research","arguments":{"topic":"go"}},
		{"id":"w","tool":"write","arguments":{"text":"$r.output.title"}}],
		"answer":"${r.output.title}: ${r.output.count} sources, saved as ${w.output.id}",
		"return":{"doc":"$w.output.id","first":"$r.output.sources[0]","n":"$r.output.count"}}}`))
	a := env.Artifact
	if !a.Success {
		t.Fatalf("the run failed: %v %v", a.Errors, a.ValidationErrors)
	}
	if want := "About go: 2 sources, saved as doc-About go"; a.Answer != want {
		t.Errorf("answer %q, want %q", a.Answer, want)
	}
	want := map[string]any{"doc": "doc-About go", "first": map[string]any{"url": "https://a.example/go", "rank": 1.0}, "n": 2.0}
	if diff := cmp.Diff(want, a.Result); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestAnswerOfAFailedReferenceIsNotRendered(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"r","tool":"research","arguments":{"topic":"go"}},
		{"id":"f","tool":"fail","on_error":"continue","arguments":{}}],
		"answer":"${r.output.title} and ${f.output.never}",
		"return":"$f.output.never"}}`))
	a := env.Artifact
	if a.Status != StatusPartial {
		t.Fatalf("status %s, want partial", a.Status)
	}
	if a.Answer != "" || a.Result != nil {
		t.Errorf("answer %q and result %v rendered from a failed step", a.Answer, a.Result)
	}
	// Without an answer the compact response keeps the outputs.
	c := env.compact()
	if c.Artifact.Steps[0].Output == nil {
		t.Errorf("the compact envelope of an unrendered answer drops the outputs")
	}
}

func TestReturnAndAnswerValidatedAtPlanTime(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"r","tool":"research","arguments":{"topic":"go"}}],
		"answer":"${r.output.titel} by ${nobody.output.x}",
		"return":{"a":["$r.output.sources[0].uri"],"b":"$bindings.missing","c":"${r.output.count"}}}`))
	a := env.Artifact
	if a.Success || len(a.Steps) != 1 || a.Steps[0].Status != StatusSkipped {
		t.Fatalf("a plan with bad answer and return templates ran: %s %+v", a.Status, a.Steps)
	}
	type got struct {
		Path string
		Code Code
	}
	var issues []got
	for _, is := range a.ValidationErrors {
		issues = append(issues, got{is.Path, is.Code})
	}
	want := []got{
		{"plan.answer", CodeFieldNotFound},
		{"plan.answer", CodeUnknownRef},
		{"plan.return.a[0]", CodeFieldNotFound},
		{"plan.return.b", CodeUnknownBinding},
		{"plan.return.c", CodeBadTemplate},
	}
	if diff := cmp.Diff(want, issues); diff != "" {
		t.Errorf("validation errors (-want +got):\n%s", diff)
	}
	if s := a.ValidationErrors[0].Suggestions; !slices.Contains(s, "title") {
		t.Errorf("no suggestion of title for titel: %v", s)
	}
}

func TestCompactAndFullResponses(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	plan := `{"steps":[{"id":"r","tool":"research","arguments":{"topic":"go"}},{"id":"w","tool":"write","arguments":{"text":"$r.output.title"}}],"answer":"saved ${w.output.id}"}`
	compact := te.Run(t.Context(), mustRequest(t, `{"plan":`+plan+`,"bindings":{"k":1}}`))
	full := te.Run(t.Context(), mustRequest(t, `{"plan":`+plan+`,"bindings":{"k":1},"response":"full"}`))

	res := Result(compact)
	if len(res.Content) != 1 {
		t.Fatalf("compact: %d content blocks, want 1 (the structured content carries the data)", len(res.Content))
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if want := compact.Summary() + "\n\nsaved doc-About go"; text != want {
		t.Errorf("compact text %q, want %q", text, want)
	}
	var c map[string]any
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &c); err != nil {
		t.Fatal(err)
	}
	art := c["artifact"].(map[string]any)
	for _, k := range []string{"plan", "bindings", "errors", "validation_errors"} {
		if _, ok := art[k]; ok {
			t.Errorf("the compact artifact has %s", k)
		}
	}
	for _, s := range art["steps"].([]any) {
		step := s.(map[string]any)
		for _, k := range []string{"arguments", "output", "path", "index", "exec_id", "started_at", "attempts"} {
			if _, ok := step[k]; ok {
				t.Errorf("compact step %v has %s", step["id"], k)
			}
		}
		if step["status"] != StatusSuccess || step["tool"] == nil {
			t.Errorf("compact step lost its status or tool: %v", step)
		}
	}
	if art["answer"] != "saved doc-About go" {
		t.Errorf("compact answer %v", art["answer"])
	}

	// An old client gets the JSON of the structured content as a second block.
	old := ResultFor(compact, "2025-03-26")
	if len(old.Content) != 2 || old.Content[1].(*mcp.TextContent).Text != string(old.StructuredContent.(json.RawMessage)) {
		t.Errorf("a 2025-03-26 client gets no JSON block equal to the structured content")
	}
	if n := len(ResultFor(compact, "2025-06-18").Content); n != 1 {
		t.Errorf("a 2025-06-18 client gets %d blocks", n)
	}

	// Full: the whole envelope, twice, as before.
	fr := Result(full)
	if len(fr.Content) != 2 || string(fr.StructuredContent.(json.RawMessage)) != string(full.JSON()) {
		t.Fatalf("the full response is not the whole envelope with its JSON block")
	}
	var f map[string]any
	_ = json.Unmarshal(full.JSON(), &f)
	fa := f["artifact"].(map[string]any)
	if fa["plan"] == nil || fa["bindings"] == nil || fa["steps"].([]any)[1].(map[string]any)["arguments"] == nil {
		t.Errorf("the full envelope lost the plan, bindings or arguments")
	}
	if len(compact.CompactJSON())*2 > len(full.JSON()) {
		t.Errorf("compact %d bytes against full %d: not even half", len(compact.CompactJSON()), len(full.JSON()))
	}
}

func TestCompactTextShowsTheLastOutput(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"x":"`+strings.Repeat("y", 5000)+`"}},{"id":"b","tool":"echo","arguments":{"v":1}}]}}`))
	text := env.Text()
	if !strings.HasSuffix(text, "Output of b: {\"v\":1}") {
		t.Errorf("compact text %q does not end with the last output", text)
	}
	env = te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"x":"`+strings.Repeat("y", 5000)+`"}}]}}`))
	if text := env.Text(); len(text) > maxTextOutput+300 || !strings.Contains(text, "truncated") {
		t.Errorf("a large last output is not cut in the text (%d bytes)", len(text))
	}
}

func TestNeededOutputs(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"response":"full","plan":{"steps":[
		{"id":"r","tool":"research","arguments":{"topic":"go"}},
		{"id":"g","parallel":[{"id":"w","tool":"write","arguments":{"text":"$0.output.title"}},{"id":"e","tool":"echo","arguments":{"v":1}}]},
		{"id":"x","tool":"echo","arguments":{"w":"$g.output.w.id"}}]}}`))
	got := env.NeededOutputs()
	if _, ok := got["x"]; !ok || len(got) != 1 {
		t.Errorf("needed outputs %v, want only x's (r and the group g are consumed)", got)
	}
	env = te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"id":"r","tool":"research","arguments":{"topic":"go"}}],"return":"$r.output.count"}}`))
	if diff := cmp.Diff(map[string]any{"result": 2.0}, env.NeededOutputs()); diff != "" {
		t.Errorf("with a return value (-want +got):\n%s", diff)
	}
}
