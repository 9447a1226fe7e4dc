package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// stepStatuses returns "id=status" for every record, children after their group.
func stepStatuses(env *Envelope) []string {
	var out []string
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, r := range rs {
			out = append(out, r.ID+"="+r.Status)
			walk(r.Children)
		}
	}
	walk(env.Artifact.Steps)
	return out
}

func errorCodes(env *Envelope) []Code {
	var out []Code
	for _, e := range env.Artifact.Errors {
		out = append(out, e.Code)
	}
	return out
}

func lastTransition(rec *pathRecorder) string {
	p := rec.path()
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1]
}

// A cancellation or deadline that comes while no step is in flight still
// stops the plan: the steps it kept from starting do not make a success.
func TestStopBetweenSteps(t *testing.T) {
	const plan = `{"plan":{"steps":[{"tool":"write","arguments":{"text":"a"}},{"tool":"write","arguments":{"text":"b"}}]}}`
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			te := newTestEngine(t, defaultCatalog(t), Limits{}, &Hooks{StepEnded: func(i StepEndedInfo) {
				if i.Step.Status == StatusSuccess {
					cancel()
				}
			}})
			env := te.Run(ctx, mustRequest(t, plan))
			te.logs.checkFSM(t)
			if got, want := stepStatuses(env), []string{"0=success", "1=skipped"}; !slices.Equal(got, want) {
				t.Errorf("steps = %v, want %v", got, want)
			}
			if env.Artifact.Status != StatusCancelled || !slices.Contains(errorCodes(env), CodeCancelled) {
				t.Errorf("status %s, errors %v; want cancelled", env.Artifact.Status, errorCodes(env))
			}
			if got, want := lastTransition(te.rec), "cancelled: dispatching_step -> failed"; got != want {
				t.Errorf("last transition %q, want %q", got, want)
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			te := newTestEngine(t, defaultCatalog(t), Limits{}, &Hooks{StepEnded: func(i StepEndedInfo) {
				if i.Step.Status == StatusSuccess {
					time.Sleep(time.Second) // the plan's 100ms pass with nothing in flight
				}
			}})
			req := mustRequest(t, plan)
			req.TimeoutMS = 100
			env := te.Run(t.Context(), req)
			te.logs.checkFSM(t)
			if got, want := stepStatuses(env), []string{"0=success", "1=skipped"}; !slices.Equal(got, want) {
				t.Errorf("steps = %v, want %v", got, want)
			}
			if env.Artifact.Status != StatusFailed || !slices.Contains(errorCodes(env), CodeTimeout) {
				t.Errorf("status %s, errors %v; want failed with timeout", env.Artifact.Status, errorCodes(env))
			}
			if got, want := lastTransition(te.rec), "timeout: dispatching_step -> failed"; got != want {
				t.Errorf("last transition %q, want %q", got, want)
			}
		})
	})
	t.Run("cancelled before the start", func(t *testing.T) {
		var calls atomic.Int32
		cat := registry.NewCatalog(fakeTool(t, "count", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			calls.Add(1)
			return structured(map[string]any{}), nil
		}))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		te := newTestEngine(t, cat, Limits{})
		env := te.Run(ctx, mustRequest(t, `{"plan":{"steps":[{"tool":"count"}]}}`))
		te.logs.checkFSM(t)
		if calls.Load() != 0 {
			t.Errorf("the tool ran %d times in a cancelled orchestration", calls.Load())
		}
		if env.Artifact.Status != StatusCancelled || !slices.Contains(errorCodes(env), CodeCancelled) {
			t.Errorf("status %s, errors %v; want cancelled", env.Artifact.Status, errorCodes(env))
		}
	})
}

// A step that fails because the run was cancelled, and whose result is
// ready by the time the scheduler looks, is the cancellation's doing: the
// run ends cancelled, not failed by the step halting it. The scheduler is
// held in awaiting_results until both the cancellation and the step's
// result are there, so that it meets them together (a select between two
// ready cases picks at random: the run repeats).
func TestCancelMeetsTheStepsResult(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			cat := registry.NewCatalog(fakeTool(t, "wait", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}))
			te := newTestEngine(t, cat, Limits{})
			held := false
			te.transition = func(tr fsm.Transition) {
				te.rec.transition(tr)
				if tr.To == fsm.StateAwaitingResults && !held {
					held = true
					cancel()
					synctest.Wait() // the step has returned and sent its result
				}
			}
			env := te.Run(ctx, mustRequest(t, `{"plan":{"steps":[{"tool":"wait"}]}}`))
			te.logs.checkFSM(t)
			if got, want := stepStatuses(env), []string{"0=cancelled"}; !slices.Equal(got, want) {
				t.Errorf("steps = %v, want %v", got, want)
			}
			if env.Artifact.Status != StatusCancelled || !slices.Contains(errorCodes(env), CodeCancelled) {
				t.Fatalf("status %s, errors %v; want cancelled", env.Artifact.Status, errorCodes(env))
			}
		})
	}
}

// schedule dag starts a step as soon as the steps it references ended, and
// independent steps at once: the wall time is the critical path.
func TestDAGStartsStepsWhenDepsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		began := map[string]time.Duration{}
		ended := map[string]time.Duration{}
		cat := registry.NewCatalog(fakeTool(t, "work", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			name := args["name"].(string)
			mu.Lock()
			began[name] = time.Since(start)
			mu.Unlock()
			time.Sleep(time.Duration(args["ms"].(float64)) * time.Millisecond)
			mu.Lock()
			ended[name] = time.Since(start)
			mu.Unlock()
			return structured(map[string]any{"name": name}), nil
		}))
		te := newTestEngine(t, cat, Limits{})
		// a(30) and b(10) are independent; c needs b; d needs a and c; e needs nothing.
		env := te.Run(t.Context(), mustRequest(t, `{"plan":{"schedule":"dag","steps":[
			{"id":"a","tool":"work","arguments":{"name":"a","ms":30}},
			{"id":"b","tool":"work","arguments":{"name":"b","ms":10}},
			{"id":"c","tool":"work","arguments":{"name":"c","ms":10,"after":"$b.output.name"}},
			{"id":"d","tool":"work","arguments":{"name":"d","ms":5,"after":["$a.output.name","$c.output.name"]}},
			{"id":"e","tool":"work","arguments":{"name":"e","ms":1}}
		]}}`))
		te.logs.checkFSM(t)
		if env.Artifact.Status != StatusSuccess {
			t.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
		}
		ms := time.Millisecond
		want := map[string]time.Duration{"a": 0, "b": 0, "c": 10 * ms, "d": 30 * ms, "e": 0}
		if diff := cmp.Diff(want, began); diff != "" {
			t.Errorf("start times (-want +got):\n%s", diff)
		}
		if got := time.Since(start); got != 35*ms {
			t.Errorf("the plan took %v, want the critical path a→d: 35ms", got)
		}
		if got := env.Metadata.DurationMS; got != 35 {
			t.Errorf("_metadata.duration_ms = %d, want 35", got)
		}
	})
}

// The sequential schedule runs one top-level step at a time, in order.
func TestSequentialRunsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inflight, peak atomic.Int32
		log := &callLog{}
		cat := registry.NewCatalog(fakeTool(t, "work", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			log.add(args["name"].(string), args)
			time.Sleep(time.Duration(args["ms"].(float64)) * time.Millisecond)
			return structured(map[string]any{}), nil
		}))
		te := newTestEngine(t, cat, Limits{})
		env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
			{"tool":"work","arguments":{"name":"a","ms":30}},
			{"tool":"work","arguments":{"name":"b","ms":10}},
			{"tool":"work","arguments":{"name":"c","ms":20}}
		]}}`))
		if env.Artifact.Status != StatusSuccess {
			t.Fatalf("status %s", env.Artifact.Status)
		}
		if got := log.names(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("order %v, want a b c", got)
		}
		if peak.Load() != 1 {
			t.Errorf("%d steps ran at once, want 1", peak.Load())
		}
		if env.Metadata.DurationMS != 60 {
			t.Errorf("duration %d ms, want 60", env.Metadata.DurationMS)
		}
	})
}

// The concurrency cap is min(group max_concurrency, request max_parallel,
// configured max_parallel), measured by a tool that counts concurrent calls.
func TestConcurrencyCap(t *testing.T) {
	for _, tc := range []struct {
		name        string
		config      int
		maxParallel int // request
		groupMax    int
		want        int32
	}{
		{"config", 3, 0, 0, 3},
		{"request lowers", 4, 2, 0, 2},
		{"request cannot raise", 2, 8, 0, 2},
		{"group lowers", 4, 3, 1, 1},
		{"group above the others", 2, 0, 6, 2},
		{"default config of 4", 0, 0, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var inflight, peak, calls atomic.Int32
				cat := registry.NewCatalog(fakeTool(t, "work", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
					calls.Add(1)
					n := inflight.Add(1)
					defer inflight.Add(-1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(10 * time.Millisecond)
					return structured(map[string]any{}), nil
				}))
				te := newTestEngine(t, cat, Limits{MaxParallel: tc.config})
				req := mustRequest(t, `{"plan":{"steps":[{"parallel":[
					{"tool":"work"},{"tool":"work"},{"tool":"work"},{"tool":"work"},{"tool":"work"},
					{"tool":"work"},{"tool":"work"},{"tool":"work"},{"tool":"work"},{"tool":"work"}]}]}}`)
				req.MaxParallel = tc.maxParallel
				req.Plan.Steps[0].MaxConcurrency = tc.groupMax
				env := te.Run(t.Context(), req)
				if env.Artifact.Status != StatusSuccess || calls.Load() != 10 {
					t.Fatalf("status %s after %d calls", env.Artifact.Status, calls.Load())
				}
				if peak.Load() != tc.want {
					t.Errorf("%d tools ran at once, want %d", peak.Load(), tc.want)
				}
			})
		})
	}
}

// The cap holds across the top-level steps of a dag and nested groups.
func TestConcurrencyCapAcrossDAG(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inflight, peak atomic.Int32
		cat := registry.NewCatalog(fakeTool(t, "work", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(10 * time.Millisecond)
			return structured(map[string]any{}), nil
		}))
		te := newTestEngine(t, cat, Limits{MaxParallel: 3})
		env := te.Run(t.Context(), mustRequest(t, `{"plan":{"schedule":"dag","steps":[
			{"parallel":[{"tool":"work"},{"tool":"work"},{"parallel":[{"tool":"work"},{"tool":"work"}]}]},
			{"tool":"work"},{"tool":"work"},
			{"parallel":[{"tool":"work"},{"tool":"work"}]}
		]}}`))
		te.logs.checkFSM(t)
		if env.Artifact.Status != StatusSuccess {
			t.Fatalf("status %s", env.Artifact.Status)
		}
		if peak.Load() != 3 {
			t.Errorf("%d tools ran at once, want 3", peak.Load())
		}
	})
}

// Retries wait backoff_ms, doubling, capped by max_backoff_ms; the waits
// run on the fake clock.
func TestRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		cat := registry.NewCatalog(fakeTool(t, "flaky", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			at = append(at, time.Since(start))
			if len(at) < 5 {
				return nil, registry.Transient(errors.New("reset"))
			}
			return structured(map[string]any{"ok": true}), nil
		}))
		te := newTestEngine(t, cat, Limits{})
		env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"tool":"flaky","retry":{"max_attempts":5,"backoff_ms":100,"max_backoff_ms":300}}]}}`))
		if env.Artifact.Status != StatusSuccess || env.Artifact.Steps[0].Attempts != 5 {
			t.Fatalf("status %s after %d attempts", env.Artifact.Status, env.Artifact.Steps[0].Attempts)
		}
		ms := time.Millisecond
		// Waits of 100, 200, 300 (capped), 300.
		want := []time.Duration{0, 100 * ms, 300 * ms, 600 * ms, 900 * ms}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("attempt times (-want +got):\n%s", diff)
		}
	})
}

// A retry's backoff is cut short by the plan's deadline.
func TestRetryBackoffStopsAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		cat := registry.NewCatalog(fakeTool(t, "flaky", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			calls.Add(1)
			return nil, registry.Transient(errors.New("reset"))
		}))
		te := newTestEngine(t, cat, Limits{})
		start := time.Now()
		env := te.Run(t.Context(), mustRequest(t, `{"timeout_ms":250,"plan":{"steps":[{"tool":"flaky","retry":{"max_attempts":5,"backoff_ms":100}}]}}`))
		if got := time.Since(start); got != 250*time.Millisecond {
			t.Errorf("the run took %v, want the plan timeout of 250ms", got)
		}
		// Attempts at 0 and 100ms; the wait of 200ms is cut at 250ms.
		if calls.Load() != 2 {
			t.Errorf("%d calls, want 2", calls.Load())
		}
		rec := env.Artifact.Steps[0]
		if rec.Status != StatusFailed || rec.Error == nil || rec.Error.Code != CodeDeadlineExceeded {
			t.Errorf("step %s %+v, want failed with deadline_exceeded", rec.Status, rec.Error)
		}
	})
}

// A step's deadline is min(its own timeout, what is left of the plan's).
func TestStepDeadline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stepTimeout string
		planTimeout int
		wantAfter   time.Duration
		wantCode    Code
	}{
		{"step timeout first", `,"timeout_ms":40`, 1000, 90, CodeTimeout},
		{"plan timeout first", `,"timeout_ms":400`, 100, 100, CodeDeadlineExceeded},
		{"configured step timeout", ``, 1000, 250, CodeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var deadline time.Duration
				start := time.Now()
				cat := defaultCatalog(t)
				if err := cat.Add(fakeTool(t, "watch", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
					d, _ := ctx.Deadline()
					deadline = d.Sub(start)
					<-ctx.Done()
					return nil, ctx.Err()
				})); err != nil {
					t.Fatal(err)
				}
				te := newTestEngine(t, cat, Limits{StepTimeout: 200 * time.Millisecond})
				req := mustRequest(t, `{"plan":{"steps":[{"tool":"slow","arguments":{"ms":50}},{"tool":"watch"`+tc.stepTimeout+`}]}}`)
				req.TimeoutMS = tc.planTimeout
				env := te.Run(t.Context(), req)
				if deadline != tc.wantAfter*time.Millisecond {
					t.Errorf("the tool's deadline is %v after the start, want %v", deadline, tc.wantAfter*time.Millisecond)
				}
				if rec := env.Artifact.Steps[1]; rec.Error == nil || rec.Error.Code != tc.wantCode {
					t.Errorf("step error %+v, want code %s", rec.Error, tc.wantCode)
				}
			})
		})
	}
}

// first_success cancels the losers' contexts as soon as one child wins.
func TestFirstSuccessCancelsLosers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		cancelledAt := map[string]time.Duration{}
		cat := registry.NewCatalog(fakeTool(t, "race", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			name := args["name"].(string)
			if err := sleepCtx(ctx, time.Duration(args["ms"].(float64))*time.Millisecond); err != nil {
				mu.Lock()
				cancelledAt[name] = time.Since(start)
				mu.Unlock()
				return nil, err
			}
			return structured(map[string]any{"name": name}), nil
		}))
		te := newTestEngine(t, cat, Limits{})
		env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"id":"g","merge":"first_success","parallel":[
			{"id":"a","tool":"race","arguments":{"name":"a","ms":300}},
			{"id":"b","tool":"race","arguments":{"name":"b","ms":20}},
			{"id":"c","tool":"race","arguments":{"name":"c","ms":100}}]}]}}`))
		if env.Artifact.Status != StatusSuccess {
			t.Errorf("status %s, want success: a first_success group that has a winner succeeds", env.Artifact.Status)
		}
		want := map[string]time.Duration{"a": 20 * time.Millisecond, "c": 20 * time.Millisecond}
		if diff := cmp.Diff(want, cancelledAt); diff != "" {
			t.Errorf("losers cancelled at (-want +got):\n%s", diff)
		}
		if got, want := stepStatuses(env), []string{"g=success", "a=cancelled", "b=success", "c=cancelled"}; !slices.Equal(got, want) {
			t.Errorf("statuses %v, want %v", got, want)
		}
		if out := env.Artifact.Steps[0].Output; !cmp.Equal(out, map[string]any{"name": "b"}) {
			t.Errorf("group output %v, want the winner's", out)
		}
		if len(env.Artifact.Errors) != 0 {
			t.Errorf("errors %v; cancelled losers of a won race are no failures", env.Artifact.Errors)
		}
	})
}

// Tools run at the caller's depth plus one; at max_depth nothing runs.
func TestDepth(t *testing.T) {
	var seen atomic.Int32
	var calls atomic.Int32
	cat := registry.NewCatalog(fakeTool(t, "d", "", "", func(ctx context.Context, args map[string]any) (*registry.Result, error) {
		calls.Add(1)
		seen.Store(int32(toolcontext.Depth(ctx)))
		return structured(map[string]any{}), nil
	}))
	for depth := range 5 {
		calls.Store(0)
		te := newTestEngine(t, cat, Limits{MaxDepth: 3})
		env := te.Run(toolcontext.WithDepth(t.Context(), depth), mustRequest(t, `{"plan":{"steps":[{"tool":"d"}]}}`))
		if env.Metadata.Depth != depth {
			t.Errorf("depth %d: _metadata.depth = %d", depth, env.Metadata.Depth)
		}
		if depth >= 3 {
			if calls.Load() != 0 || !slices.Equal(errorCodes(env), []Code{CodeDepthExceeded}) {
				t.Errorf("depth %d: %d calls, errors %v; want none and depth_exceeded", depth, calls.Load(), errorCodes(env))
			}
			if got := te.rec.path(); !slices.Equal(got, []string{"validation_failed: plan_init -> failed"}) {
				t.Errorf("depth %d: path %v", depth, got)
			}
			continue
		}
		if calls.Load() != 1 || seen.Load() != int32(depth+1) {
			t.Errorf("depth %d: %d calls, the tool saw depth %d; want 1 call at depth %d", depth, calls.Load(), seen.Load(), depth+1)
		}
	}
}

// Exec ids come from Options.NewID: one for the run, one per started step.
func TestExecIDs(t *testing.T) {
	te := newTestEngine(t, defaultCatalog(t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"tool":"write","arguments":{"text":"a"}},{"tool":"write","arguments":{"text":"b"}}]}}`))
	if env.ArtifactID != "id-1" || env.Metadata.ExecID != "id-1" {
		t.Errorf("artifact_id %q, exec_id %q; want id-1", env.ArtifactID, env.Metadata.ExecID)
	}
	var ids []string
	for _, r := range env.Artifact.Steps {
		ids = append(ids, r.ExecID)
		if r.StartedAt == nil {
			t.Errorf("step %s has no started_at", r.ID)
		}
	}
	if !slices.Equal(ids, []string{"id-2", "id-3"}) {
		t.Errorf("step exec ids %v, want id-2 id-3", ids)
	}
}

// The values the response carries (outputs, resolved arguments, bindings)
// fit the response cap, each under the per-step cap, and the envelope says
// it truncated them.
func TestResponseCap(t *testing.T) {
	te := newTestEngine(t, defaultCatalog(t), Limits{MaxStepOutputBytes: 5000, MaxResponseBytes: 6000})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"result_key":"a","tool":"big","arguments":{"size":4000}},
		{"result_key":"b","tool":"echo","arguments":{"v":"$a.output.data"}},
		{"tool":"echo","arguments":{"v":"${a.output.data}${b.output.v}"}}
	]}}`))
	if env.Artifact.Status != StatusSuccess {
		t.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
	}
	size := func(v any) int {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return len(data)
	}
	total := 0
	for _, r := range env.Artifact.Steps {
		for _, v := range []any{r.Output, r.Arguments} {
			if n := size(v); n > 5000 {
				t.Errorf("step %s carries a value of %d bytes, over the per-step cap", r.ID, n)
			} else {
				total += n
			}
		}
	}
	for k, v := range env.Artifact.Bindings {
		if n := size(v); n > 5000 {
			t.Errorf("binding %s carries %d bytes, over the per-step cap", k, n)
		} else {
			total += n
		}
	}
	if total > 6000 {
		t.Errorf("the response carries %d bytes of values, over the cap of 6000", total)
	}
	if !env.Artifact.Truncated {
		t.Errorf("truncated is not set")
	}
}

// TestResultContent checks the two text blocks of a result: the summary
// for people, then exactly the structured content as JSON, so that a
// client that parses a text block finds one that parses.
func TestResultContent(t *testing.T) {
	te := newTestEngine(t, testCatalogs["default"](t), Limits{})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"tool":"write","arguments":{"text":"hi"}}]},"response":"full"}`))
	res := Result(env)
	if len(res.Content) != 2 {
		t.Fatalf("want 2 content blocks, got %d", len(res.Content))
	}
	summary := res.Content[0].(*mcp.TextContent).Text
	if summary != env.Text() || json.Valid([]byte(summary)) {
		t.Errorf("the first block is not the summary line: %q", summary)
	}
	data := res.Content[1].(*mcp.TextContent).Text
	var got, want any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("the second block is not JSON: %v\n%s", err, data)
	}
	structured, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(structured, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the JSON block differs from structuredContent (-want +got):\n%s", diff)
	}
}
