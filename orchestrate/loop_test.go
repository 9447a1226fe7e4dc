package orchestrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
)

const listOut = `{"type":"object","properties":{
	"entries":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"size":{"type":"integer"}},"required":["name"]}},
	"dir":{"type":"string"}
}}`

// loopCatalog has list, which lists n entries named f0..f<n-1> (n is an
// argument), read, which reads one (after ms of fake time), and check,
// which returns its argument as ok.
func loopCatalog(t testing.TB, log *callLog, inflight, peak *atomic.Int32) *registry.Catalog {
	return registry.NewCatalog(
		fakeTool(t, "list", `{"type":"object","properties":{"n":{"type":"integer"}}}`, listOut, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			log.add("list", args)
			entries := []any{}
			for i := range argInt(args, "n", 3) {
				entries = append(entries, map[string]any{"name": fmt.Sprintf("f%d", i), "size": float64(i)})
			}
			return structured(map[string]any{"entries": entries, "dir": "/d"}), nil
		}),
		fakeTool(t, "read", `{"type":"object","properties":{"name":{"type":"string"},"index":{"type":"integer"},"ms":{"type":"integer"}},"required":["name"],"additionalProperties":false}`,
			`{"type":"object","properties":{"text":{"type":"string"}}}`,
			func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				log.add("read", args)
				if inflight != nil {
					n := inflight.Add(1)
					defer inflight.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
				}
				if err := sleepCtx(ctx, time.Duration(argInt(args, "ms", 0))*time.Millisecond); err != nil {
					return nil, err
				}
				name := argString(args, "name", "")
				if name == "bad" {
					return registry.ErrorResult("cannot read bad"), nil
				}
				return structured(map[string]any{"text": fmt.Sprintf("contents of %s (%d)", name, argInt(args, "index", -1))}), nil
			}),
		fakeTool(t, "check", `{"type":"object","properties":{"ok":{}}}`, `{"type":"object","properties":{"ok":{}}}`, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			log.add("check", args)
			return structured(map[string]any{"ok": args["ok"]}), nil
		}),
		fakeTool(t, "render", `{"type":"object","properties":{"texts":{"type":"array"},"first":{"type":"string"}}}`, `{"type":"object","properties":{"text":{"type":"string"}}}`, func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			log.add("render", args)
			return structured(map[string]any{"text": fmt.Sprint(args["texts"], args["first"])}), nil
		}),
	)
}

func issueCodes(issues []*Issue) []Code {
	var out []Code
	for _, is := range issues {
		out = append(out, is.Code)
	}
	return out
}

// A loop runs its body once per element, at most max_concurrency at once,
// with $item and $item_index, and its output is the array of the bodies'
// outputs in element order; a later step reads it.
func TestForEachRunsBodyPerElement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		var inflight, peak atomic.Int32
		var mu sync.Mutex
		var totals []int // Run.Steps() as each tool step ended
		te := newTestEngine(t, loopCatalog(t, log, &inflight, &peak), Limits{}, &Hooks{StepEnded: func(i StepEndedInfo) {
			mu.Lock()
			totals = append(totals, i.Run.Steps())
			mu.Unlock()
		}})
		env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
			{"id":"list","tool":"list","arguments":{"n":10}},
			{"id":"reads","for_each":"$list.output.entries","as":"item","max_concurrency":3,
			 "do":{"tool":"read","arguments":{"name":"$item.name","index":"$item_index","ms":"$item.size"}}},
			{"id":"report","tool":"render","arguments":{"texts":"$reads.output","first":"$reads.output[0].text"}}]}}`))
		te.logs.checkFSM(t)
		checkLifecycle(t, env, te.rec.calls())
		if env.Artifact.Status != StatusSuccess {
			t.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
		}
		loop := env.Artifact.Steps[1]
		out, _ := loop.Output.([]any)
		if loop.Type != TypeForEach || len(out) != 10 || len(loop.Children) != 10 {
			t.Fatalf("loop record: type %s, %d outputs, %d iterations", loop.Type, len(out), len(loop.Children))
		}
		for i, o := range out {
			want := fmt.Sprintf("contents of f%d (%d)", i, i)
			if got := o.(map[string]any)["text"]; got != want {
				t.Errorf("output[%d] = %v, want %q (element order)", i, got, want)
			}
			it := loop.Children[i]
			if it.Iteration == nil || *it.Iteration != i || it.ID != fmt.Sprintf("reads[%d]", i) || it.Path != fmt.Sprintf("plan.steps[1].do[%d]", i) || it.Status != StatusSuccess {
				t.Errorf("iteration %d: id %s path %s iteration %v status %s", i, it.ID, it.Path, it.Iteration, it.Status)
			}
		}
		if got := env.Artifact.Steps[2].Arguments["first"]; got != "contents of f0 (0)" {
			t.Errorf("report got first %v", got)
		}
		if peak.Load() != 3 {
			t.Errorf("%d iterations ran at once, want max_concurrency 3", peak.Load())
		}
		// Progress: the total is 3 tool steps until the array resolves,
		// then 12 (list, 10 reads, report).
		if totals[0] != 3 || totals[len(totals)-1] != 12 {
			t.Errorf("steps as they ended: %v; want 3 at first, 12 at last", totals)
		}
	})
}

// A loop over an empty array succeeds with [].
func TestForEachEmpty(t *testing.T) {
	log := &callLog{}
	te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"list","tool":"list","arguments":{"n":0}},
		{"id":"reads","for_each":"$list.output.entries","do":{"tool":"read","arguments":{"name":"$item.name"}}},
		{"id":"report","tool":"render","arguments":{"texts":"$reads.output"}}]}}`))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if env.Artifact.Status != StatusSuccess {
		t.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
	}
	if diff := cmp.Diff([]any{}, env.Artifact.Steps[1].Output); diff != "" {
		t.Errorf("loop output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"list", "render"}, log.names()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// Plan-time errors of loops, each before anything runs.
func TestForEachPlanTime(t *testing.T) {
	hundred := make([]string, 100)
	for i := range hundred {
		hundred[i] = fmt.Sprintf(`{"name":"f%d"}`, i)
	}
	for _, tc := range []struct {
		name, plan string
		bindings   string
		lim        Limits
		code       Code
		path       string
		message    string
	}{{
		name: "non-array source",
		plan: `{"id":"list","tool":"list"},{"id":"reads","for_each":"$list.output.dir","do":{"tool":"read","arguments":{"name":"$item"}}}`,
		code: CodeNotAnArray, path: "plan.steps[1].for_each", message: "is string, not an array",
	}, {
		name: "non-array binding",
		plan: `{"id":"reads","for_each":"$bindings.files","do":{"tool":"read","arguments":{"name":"$item"}}}`, bindings: `{"files":"a.txt"}`,
		code: CodeNotAnArray, path: "plan.steps[0].for_each",
	}, {
		name: "field the items schema lacks",
		plan: `{"id":"list","tool":"list"},{"id":"reads","for_each":"$list.output.entries","do":{"tool":"read","arguments":{"name":"$item.path"}}}`,
		code: CodeFieldNotFound, path: "plan.steps[1].do.arguments.name", message: `field "path" does not exist; available: name, size`,
	}, {
		name: "type the argument does not take",
		plan: `{"id":"list","tool":"list"},{"id":"reads","for_each":"$list.output.entries","do":{"tool":"read","arguments":{"name":"$item.size"}}}`,
		code: CodeTypeMismatch, path: "plan.steps[1].do.arguments.name",
	}, {
		name: "field a known element lacks",
		plan: `{"id":"reads","for_each":"$bindings.files","do":{"tool":"read","arguments":{"name":"$item.path"}}}`, bindings: `{"files":[{"path":"a"},{"name":"b"}]}`,
		code: CodeFieldNotFound, path: "plan.steps[0].do.arguments.name", message: "in element 1",
	}, {
		name: "count known over max_iterations",
		plan: `{"id":"reads","for_each":"$bindings.files","do":{"tool":"read","arguments":{"name":"$item.name"}}}`, bindings: `{"files":[` + strings.Join(hundred, ",") + `]}`,
		code: CodeLimitExceeded, path: "plan.steps[0].for_each", message: "limits.max_iterations",
	}, {
		name: "count known over max_tool_calls",
		plan: `{"id":"reads","for_each":["a","b","c"],"do":{"tool":"read","arguments":{"name":"$item"}}}`,
		lim:  Limits{MaxToolCalls: 2}, code: CodeLimitExceeded, message: "limits.max_tool_calls",
	}, {
		name: "templates in an array",
		plan: `{"id":"list","tool":"list"},{"id":"reads","for_each":["$list.output.dir"],"do":{"tool":"read","arguments":{"name":"$item"}}}`,
		code: CodeInvalidValue, path: "plan.steps[1].for_each",
	}, {
		name: "loop variable outside the loop",
		plan: `{"id":"reads","for_each":["a"],"do":{"tool":"read","arguments":{"name":"$item"}}},{"tool":"read","arguments":{"name":"$item"}}`,
		code: CodeUnknownRef, path: "plan.steps[1].arguments.name",
	}, {
		name: "reference into a loop's body",
		plan: `{"id":"reads","for_each":["a"],"do":{"id":"r","tool":"read","arguments":{"name":"$item"}}},{"tool":"read","arguments":{"name":"$r.output.text"}}`,
		code: CodeInsideLoop, path: "plan.steps[1].arguments.name",
	}, {
		name: "the loop's output is an array",
		plan: `{"id":"reads","for_each":["a"],"do":{"tool":"read","arguments":{"name":"$item"}}},{"tool":"read","arguments":{"name":"$reads.output.text"}}`,
		code: CodeFieldNotFound, message: "index it",
	}, {
		name: "an element's output field",
		plan: `{"id":"reads","for_each":["a"],"do":{"tool":"read","arguments":{"name":"$item"}}},{"tool":"read","arguments":{"name":"$reads.output[0].txt"}}`,
		code: CodeFieldNotFound, path: "plan.steps[1].arguments.name",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			te := newTestEngine(t, loopCatalog(t, log, nil, nil), tc.lim)
			js := `{"plan":{"steps":[` + tc.plan + `]}`
			if tc.bindings != "" {
				js += `,"bindings":` + tc.bindings
			}
			env := te.Run(t.Context(), mustRequest(t, js+`}`))
			te.logs.checkFSM(t)
			if n := len(log.names()); n != 0 {
				t.Errorf("%d tools ran", n)
			}
			if diff := cmp.Diff([]string{"validation_failed: plan_init -> failed"}, te.rec.path()); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
			errs := env.Artifact.ValidationErrors
			if len(errs) != 1 || errs[0].Code != tc.code || (tc.path != "" && errs[0].Path != tc.path) || !strings.Contains(errs[0].Message, tc.message) {
				t.Fatalf("validation errors %s: want one %s at %q saying %q", env.JSON(), tc.code, tc.path, tc.message)
			}
		})
	}
}

// A count over max_iterations known only when the array resolves fails
// the loop then, naming the limit, before any iteration runs; the state
// machine fires limit_exceeded.
func TestForEachLimitWhenResolved(t *testing.T) {
	log := &callLog{}
	te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"list","tool":"list","arguments":{"n":100}},
		{"id":"reads","for_each":"$list.output.entries","do":{"tool":"read","arguments":{"name":"$item.name"}}},
		{"tool":"render","arguments":{"texts":"$reads.output"}}]}}`))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if diff := cmp.Diff([]string{"list"}, log.names()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if env.Artifact.Status != StatusFailed || lastTransition(te.rec) != "limit_exceeded: awaiting_results -> failed" {
		t.Fatalf("status %s, path %v", env.Artifact.Status, te.rec.path())
	}
	if got := errorCodes(env); !slices.Contains(got, CodeLimitExceeded) {
		t.Errorf("errors %v lack limit_exceeded", got)
	}
	rec := env.Artifact.Steps[1]
	if rec.Error == nil || rec.Error.Code != CodeLimitExceeded || !strings.Contains(rec.Error.Message, "limits.max_iterations") || !strings.Contains(rec.Error.Message, "100 elements") {
		t.Errorf("loop error %+v", rec.Error)
	}
	if got := env.Artifact.Steps[2].Status; got != StatusSkipped {
		t.Errorf("the step after the loop is %s, want skipped", got)
	}
}

// Every tool call counts towards max_tool_calls: the call over it fails
// naming the limit and the run stops.
func TestMaxToolCalls(t *testing.T) {
	log := &callLog{}
	te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{MaxToolCalls: 2})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"tool":"check","arguments":{"ok":1}},{"tool":"check","arguments":{"ok":2}},{"tool":"check","arguments":{"ok":3}},{"tool":"check","arguments":{"ok":4}}]}}`))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if len(log.names()) != 2 || lastTransition(te.rec) != "limit_exceeded: awaiting_results -> failed" {
		t.Fatalf("calls %v, path %v", log.names(), te.rec.path())
	}
	if diff := cmp.Diff([]string{"0=success", "1=success", "2=failed", "3=skipped"}, stepStatuses(env)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if e := env.Artifact.Steps[2].Error; e == nil || e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "limits.max_tool_calls") {
		t.Errorf("error %+v", e)
	}
	// A loop whose elements would pass the budget fails as its array
	// resolves, before any iteration.
	log = &callLog{}
	te = newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{MaxToolCalls: 5})
	env = te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"list","tool":"list","arguments":{"n":5}},
		{"id":"reads","for_each":"$list.output.entries","do":{"tool":"read","arguments":{"name":"$item.name"}}}]}}`))
	te.logs.checkFSM(t)
	if e := env.Artifact.Steps[1].Error; len(log.names()) != 1 || e == nil || e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "limits.max_tool_calls") {
		t.Errorf("calls %v, loop error %+v", log.names(), e)
	}
}

// With merge collect a failed iteration fails the loop and halts the
// plan; with all_settled it leaves null and the loop is partial.
func TestForEachFailures(t *testing.T) {
	const plan = `{"plan":{"steps":[
		{"id":"reads","for_each":["a","bad","c"],"max_concurrency":1,"merge":%q,"do":{"tool":"read","arguments":{"name":"$item"}}},
		{"tool":"render","arguments":{"texts":"$reads.output"}}]}}`
	log := &callLog{}
	te := newTestEngine(t, loopCatalog(t, log, nil, nil), Limits{})
	env := te.Run(t.Context(), mustRequest(t, fmt.Sprintf(plan, MergeCollect)))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	// The iteration the failure kept from starting has no record: the
	// loop's counts it.
	if diff := cmp.Diff([]string{"reads=failed", "reads[0]=success", "reads[1]=failed", "1=skipped"}, stepStatuses(env)); diff != "" {
		t.Errorf("collect statuses (-want +got):\n%s", diff)
	}
	if n := env.Artifact.Steps[0].SkippedIterations; n != 1 {
		t.Errorf("skipped_iterations %d, want 1", n)
	}
	if e := env.Artifact.Steps[0].Error; e == nil || e.Code != CodeToolError || !strings.Contains(e.Message, "iteration 1") {
		t.Errorf("loop error %+v", e)
	}

	te = newTestEngine(t, loopCatalog(t, &callLog{}, nil, nil), Limits{})
	env = te.Run(t.Context(), mustRequest(t, fmt.Sprintf(plan, MergeAllSettled)))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if diff := cmp.Diff([]string{"reads=partial", "reads[0]=success", "reads[1]=failed", "reads[2]=success", "1=success"}, stepStatuses(env)); diff != "" {
		t.Errorf("all_settled statuses (-want +got):\n%s", diff)
	}
	out := env.Artifact.Steps[0].Output.([]any)
	if len(out) != 3 || out[1] != nil || out[2] == nil {
		t.Errorf("all_settled output %v", out)
	}
}

// A body may be a group; its children see $item, and the loop's output
// holds each iteration's collected object.
func TestForEachGroupBody(t *testing.T) {
	te := newTestEngine(t, loopCatalog(t, &callLog{}, nil, nil), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"reads","for_each":["a","b"],"do":{"parallel":[
			{"id":"one","tool":"read","arguments":{"name":"$item"}},
			{"id":"two","tool":"read","arguments":{"name":"${item}-2","index":"$item_index"}}]}},
		{"tool":"render","arguments":{"first":"$reads.output[1].two.text"}}]}}`))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if env.Artifact.Status != StatusSuccess {
		t.Fatalf("status %s: %s", env.Artifact.Status, env.JSON())
	}
	if diff := cmp.Diff([]string{"reads=success", "reads[0]=success", "one[0]=success", "two[0]=success", "reads[1]=success", "one[1]=success", "two[1]=success", "1=success"}, stepStatuses(env)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if got := env.Artifact.Steps[1].Arguments["first"]; got != "contents of b-2 (1)" {
		t.Errorf("first = %v", got)
	}
}

// Loops nest: the inner loop runs over a field of the outer element, and
// its body sees both variables.
func TestForEachNested(t *testing.T) {
	te := newTestEngine(t, loopCatalog(t, &callLog{}, nil, nil), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"bindings":{"docs":[{"name":"a","parts":["x","y"]},{"name":"b","parts":["z"]}]},"plan":{"steps":[
		{"id":"outer","for_each":"$bindings.docs","as":"doc","do":
			{"for_each":"$doc.parts","as":"part","do":{"tool":"read","arguments":{"name":"${doc.name}-${part}","index":"$part_index"}}}}]}}`))
	te.logs.checkFSM(t)
	checkLifecycle(t, env, te.rec.calls())
	if env.Artifact.Status != StatusSuccess {
		t.Fatalf("status %s: %s", env.Artifact.Status, env.JSON())
	}
	got := fmt.Sprint(env.Artifact.Steps[0].Output)
	if want := "[[map[text:contents of a-x (0)] map[text:contents of a-y (1)]] [map[text:contents of b-z (0)]]]"; got != want {
		t.Errorf("output %s, want %s", got, want)
	}
}

// A tenant or a request may lower the loop limits, never raise them.
func TestLowerLoopLimits(t *testing.T) {
	got := DefaultLimits().Lower(Limits{MaxIterations: 5, MaxToolCalls: 500})
	if got.MaxIterations != 5 || got.MaxToolCalls != 100 {
		t.Errorf("max_iterations %d, max_tool_calls %d; want 5 and 100", got.MaxIterations, got.MaxToolCalls)
	}
}
