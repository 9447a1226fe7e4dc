package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
)

func TestTruthy(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{nil, false}, {false, false}, {0.0, false}, {"", false}, {[]any{}, false}, {map[string]any{}, false},
		{true, true}, {1.0, true}, {-0.5, true}, {"no", true}, {[]any{nil}, true}, {map[string]any{"a": nil}, true},
	} {
		if got := truthy(tc.v); got != tc.want {
			t.Errorf("truthy(%#v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// reasonCodes returns "id=reason" for every skipped record with a reason.
func reasonCodes(env *Envelope) []string {
	var out []string
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, r := range rs {
			if r.Reason != nil {
				out = append(out, r.ID+"="+string(r.Reason.Code))
			}
			walk(r.Children)
		}
	}
	walk(env.Artifact.Steps)
	return out
}

// A step with when runs when the value is truthy and is skipped with the
// reason condition_false when it is false or null; a skip is no failure.
func TestWhen(t *testing.T) {
	for _, tc := range []struct {
		ok   string
		runs bool
	}{{`true`, true}, {`"yes"`, true}, {`false`, false}, {`null`, false}, {`0`, false}, {`[]`, false}} {
		t.Run(tc.ok, func(t *testing.T) {
			log := &callLog{}
			te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{})
			env := te.Run(t.Context(), mustRequest(t, fmt.Sprintf(`{"plan":{"steps":[
				{"id":"c","tool":"check","arguments":{"ok":%s}},
				{"id":"r","when":"$c.output.ok","tool":"read","arguments":{"name":"x"}}]}}`, tc.ok)))
			te.logs.checkFSM(t)
			checkLifecycle(t, env, te.rec.calls())
			if env.Artifact.Status != StatusSuccess || len(env.Artifact.Errors) != 0 {
				t.Fatalf("status %s, errors %v", env.Artifact.Status, env.Artifact.Errors)
			}
			rec := env.Artifact.Steps[1]
			if tc.runs {
				if rec.Status != StatusSuccess || rec.Reason != nil {
					t.Errorf("step r: %s, reason %+v", rec.Status, rec.Reason)
				}
				return
			}
			if rec.Status != StatusSkipped || rec.Reason == nil || rec.Reason.Code != CodeConditionFalse || rec.Error != nil || rec.StartedAt != nil {
				t.Errorf("step r: %s, reason %+v, error %+v", rec.Status, rec.Reason, rec.Error)
			}
			if diff := cmp.Diff([]string{"check"}, log.names()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// The steps that need a skipped step's output are skipped with the same
// reason, at any depth and in a dag; a step that refers to a conditional
// step without a when of its own gets a plan-time warning.
func TestWhenDependents(t *testing.T) {
	for _, schedule := range []string{ScheduleSequential, ScheduleDAG} {
		t.Run(schedule, func(t *testing.T) {
			log := &callLog{}
			te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{})
			env := te.Run(t.Context(), mustRequest(t, `{"plan":{"schedule":"`+schedule+`","steps":[
				{"id":"c","tool":"check","arguments":{"ok":false}},
				{"id":"b","when":"$c.output.ok","tool":"read","arguments":{"name":"x"}},
				{"id":"dep","tool":"read","arguments":{"name":"$b.output.text"}},
				{"id":"own","when":"$b.output.text","tool":"read","arguments":{"name":"y"}},
				{"id":"g","parallel":[
					{"id":"inner","tool":"read","arguments":{"name":"${b.output.text}!"}},
					{"id":"free","tool":"read","arguments":{"name":"z"}}]},
				{"id":"after","tool":"read","arguments":{"name":"$dep.output.text"}}]}}`))
			te.logs.checkFSM(t)
			checkLifecycle(t, env, te.rec.calls())
			if env.Artifact.Status != StatusSuccess {
				t.Fatalf("status %s: %s", env.Artifact.Status, env.JSON())
			}
			if diff := cmp.Diff([]string{"c=success", "b=skipped", "dep=skipped", "own=skipped", "g=success", "inner=skipped", "free=success", "after=skipped"}, stepStatuses(env)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"b=" + string(CodeConditionFalse), "dep=" + string(CodeConditionFalse), "own=" + string(CodeConditionFalse), "inner=" + string(CodeConditionFalse), "after=" + string(CodeConditionFalse)}, reasonCodes(env)); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if r := env.Artifact.Steps[2].Reason; !strings.Contains(r.Message, "step b") {
				t.Errorf("dep's reason %q does not name b", r.Message)
			}
			var warned []string
			for _, w := range env.Artifact.Warnings {
				if w.Code == CodeConditional {
					warned = append(warned, w.StepID)
				}
			}
			if diff := cmp.Diff([]string{"dep", "inner"}, warned); diff != "" {
				t.Errorf("conditional_reference warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// when on a group skips the group and its children; when on a loop's body
// skips the iterations whose element is falsy, which leave null.
func TestWhenOnGroupAndLoop(t *testing.T) {
	log := &callLog{}
	te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"c","tool":"check","arguments":{"ok":null}},
		{"id":"g","when":"$c.output.ok","parallel":[
			{"id":"x","tool":"read","arguments":{"name":"x"}},
			{"id":"y","tool":"read","arguments":{"name":"y"}}]},
		{"id":"reads","for_each":[{"name":"a","keep":true},{"name":"b","keep":false},{"name":"c","keep":1}],
		 "do":{"when":"$item.keep","tool":"read","arguments":{"name":"$item.name"}}},
		{"id":"t","when":"$reads.output[1]","tool":"read","arguments":{"name":"never"}}]}}`))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if env.Artifact.Status != StatusSuccess || len(env.Artifact.Errors) != 0 {
		t.Fatalf("status %s: %s", env.Artifact.Status, env.JSON())
	}
	// The iteration its condition skipped has no record; the loop's
	// counts it.
	if diff := cmp.Diff([]string{"c=success", "g=skipped", "x=skipped", "y=skipped", "reads=success", "reads[0]=success", "reads[2]=success", "t=skipped"}, stepStatuses(env)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if n := env.Artifact.Steps[2].SkippedIterations; n != 1 {
		t.Errorf("skipped_iterations %d, want 1", n)
	}
	if diff := cmp.Diff([]string{"g=" + string(CodeConditionFalse), "t=" + string(CodeConditionFalse)}, reasonCodes(env)); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	out := env.Artifact.Steps[2].Output.([]any)
	if len(out) != 3 || out[0] == nil || out[1] != nil || out[2] == nil {
		t.Errorf("loop output %v: want null where the condition was false", out)
	}
	if diff := cmp.Diff([]string{"check", "read", "read"}, log.names()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// when must be one reference to something known before its step starts.
func TestWhenPlanTime(t *testing.T) {
	for _, tc := range []struct {
		when string
		code Code
	}{
		{`yes`, CodeInvalidValue},
		{`${c.output.ok} and more`, CodeInvalidValue},
		{`$c.output.nope`, CodeFieldNotFound},
		{`$later.output.ok`, CodeForwardRef},
		{`$bindings.missing`, CodeUnknownBinding},
	} {
		t.Run(tc.when, func(t *testing.T) {
			te := newTestEngine(t, loopCatalog(t, &callLog{}, nil, nil), Limits{})
			env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
				{"id":"c","tool":"check","arguments":{"ok":true}},
				{"id":"r","when":"`+tc.when+`","tool":"read","arguments":{"name":"x"}},
				{"id":"later","tool":"check"}]}}`))
			errs := env.Artifact.ValidationErrors
			if len(errs) != 1 || errs[0].Code != tc.code || errs[0].Path != "plan.steps[1].when" {
				t.Errorf("validation errors %s: want one %s at plan.steps[1].when", env.JSON(), tc.code)
			}
		})
	}
}

// An in-process tool's typed output (a struct, Go ints, a json.Number) is
// read as the JSON it encodes to: zeros are falsy and every output is the
// same kind of value a downstream server's would be.
func TestTypedOutputsArePlainJSON(t *testing.T) {
	type counted struct {
		Count int         `json:"count"`
		Big   json.Number `json:"big"`
		Of    []int64     `json:"of"`
	}
	typed := fakeTool(t, "typed", "", `{"type":"object","properties":{"count":{"type":"integer"},"big":{"type":"number"},"of":{"type":"array","items":{"type":"integer"}}}}`,
		func(context.Context, map[string]any) (*registry.Result, error) {
			return structured(counted{Count: 0, Big: "12.5", Of: []int64{0, 3}}), nil
		})
	echo := fakeTool(t, "echo", "", "", func(_ context.Context, args map[string]any) (*registry.Result, error) { return structured(args), nil })
	te := newTestEngine(t, registry.NewCatalog(typed, echo), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"t","tool":"typed","arguments":{}},
		{"id":"zero","when":"$t.output.count","tool":"echo","arguments":{}},
		{"id":"first","when":"$t.output.of[0]","tool":"echo","arguments":{}},
		{"id":"second","when":"$t.output.of[1]","tool":"echo","arguments":{"n":"$t.output.of[1]","b":"$t.output.big"}}]}}`))
	if got := reasonCodes(env); !slices.Equal(got, []string{"zero=" + string(CodeConditionFalse), "first=" + string(CodeConditionFalse)}) {
		t.Errorf("skipped %v; want zero and first skipped for their 0", got)
	}
	out, _ := env.Artifact.Steps[3].Output.(map[string]any)
	if out["n"] != 3.0 || out["b"] != 12.5 {
		t.Errorf("second's arguments are %#v; want the float64 3 and 12.5 of decoded JSON", out)
	}
	if _, ok := env.Artifact.Steps[0].Output.(map[string]any); !ok {
		t.Errorf("typed's output is %T, not a JSON object", env.Artifact.Steps[0].Output)
	}
}

// BenchmarkPlainJSON measures what reading every output as plain JSON
// costs: the walk over an output that is plain already (every downstream
// tool's), against encoding it as JSON (which its envelope and record do
// anyway), and the round trip of a typed one (an in-process tool's):
//
//	go test -run '^$' -bench PlainJSON ./orchestrate/
func BenchmarkPlainJSON(b *testing.B) {
	items := make([]any, 2000)
	for i := range items {
		items[i] = map[string]any{"id": float64(i), "name": fmt.Sprint("item ", i), "tags": []any{"a", "b"}, "ok": i%2 == 0}
	}
	plain := map[string]any{"items": items, "count": float64(len(items))}
	typed := map[string]any{"items": items, "count": len(items)} // one int
	b.Run("walk/plain", func(b *testing.B) {
		for b.Loop() {
			plainJSON(plain)
		}
	})
	b.Run("encode/plain", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(plain)
		}
	})
	b.Run("roundtrip/typed", func(b *testing.B) {
		for b.Loop() {
			plainJSON(typed)
		}
	})
}
