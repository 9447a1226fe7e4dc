package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry"
)

// budgetCatalog has a tool that returns a text of the size it is asked
// for, and a sink that counts its calls (a loop's iterations call it at
// once; the count is read after the run).
func budgetCatalog(t *testing.T, sinkCalls *int) *registry.Catalog {
	t.Helper()
	big := fakeTool(t, "big", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"type":"object","properties":{"text":{"type":"string"}}}`,
		func(_ context.Context, args map[string]any) (*registry.Result, error) {
			n, _ := args["n"].(float64)
			return structured(map[string]any{"text": strings.Repeat("x", int(n))}), nil
		})
	var mu sync.Mutex
	sink := fakeTool(t, "sink", "", "", func(context.Context, map[string]any) (*registry.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		*sinkCalls++
		return structured(map[string]any{"ok": true}), nil
	})
	return registry.NewCatalog(big, sink)
}

func stepError(env *Envelope, id string) *Error {
	for _, rec := range env.Artifact.Steps {
		if rec.ID == id {
			return rec.Error
		}
	}
	return nil
}

// TestArgumentAmplification: one 250 KB output referenced 998 times by a
// 20 KB plan used to peak at 800 MB. The budget is kept while the
// arguments resolve, so the step fails before anything large is built.
func TestArgumentAmplification(t *testing.T) {
	refs := func(form string) string {
		var b strings.Builder
		for i := range 998 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"v%d":"%s"`, i, form)
		}
		return b.String()
	}
	plans := map[string]string{
		"whole":        `{"plan":{"steps":[{"id":"a","tool":"big","arguments":{"n":250000}},{"id":"b","tool":"sink","arguments":{` + refs("$a.output.text") + `}}]}}`,
		"interpolated": `{"plan":{"steps":[{"id":"a","tool":"big","arguments":{"n":250000}},{"id":"b","tool":"sink","arguments":{"s":"` + strings.Repeat("${a.output.text}", 998) + `"}}]}}`,
		"output":       `{"plan":{"steps":[{"id":"a","tool":"big","arguments":{"n":250000}},{"id":"b","tool":"sink","arguments":{"o":"$a.output"}}]}}`,
	}
	for name, plan := range plans {
		t.Run(name, func(t *testing.T) {
			calls := 0
			te := newTestEngine(t, budgetCatalog(t, &calls), Limits{MaxTemplates: 1000})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			env := te.Run(t.Context(), mustRequest(t, plan))
			runtime.ReadMemStats(&after)
			if name == "output" {
				if !env.Artifact.Success || calls != 1 {
					t.Fatalf("a single reference failed: %v", errorCodes(env))
				}
				return
			}
			e := stepError(env, "b")
			if e == nil || e.Code != CodeTooLarge || !strings.Contains(e.Message, "limits.max_argument_bytes") || !strings.Contains(e.Message, "4 MiB") {
				t.Fatalf("step b error = %+v, want too_large naming limits.max_argument_bytes", e)
			}
			if calls != 0 {
				t.Errorf("the sink was called %d times; the step must fail before its tool is called", calls)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
				t.Errorf("the run allocated %d MiB; the budget must stop it before it copies the value", grown>>20)
			}
			if data := env.JSON(); len(data) > 4<<20 {
				t.Errorf("the envelope is %d bytes", len(data))
			}
		})
	}
}

// TestRunBytes: the outputs and arguments of one run's steps count
// against limits.max_run_bytes.
func TestRunBytes(t *testing.T) {
	calls := 0
	te := newTestEngine(t, budgetCatalog(t, &calls), Limits{MaxRunBytes: 1 << 20})
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[
		{"id":"a","tool":"big","arguments":{"n":400000}},
		{"id":"b","tool":"big","arguments":{"n":400000}},
		{"id":"c","tool":"big","arguments":{"n":400000}}]}}`))
	if got := stepStatuses(env); strings.Join(got, " ") != "a=success b=success c=failed" {
		t.Fatalf("statuses %v", got)
	}
	if e := stepError(env, "c"); e.Code != CodeTooLarge || !strings.Contains(e.Message, "limits.max_run_bytes") {
		t.Errorf("step c error = %+v", e)
	}
	if used := te.MemoryHeld(); used != 0 {
		t.Errorf("the run ended and still holds %d bytes of the server's budget", used)
	}
}

// TestMemoryBudget: the runs of engines sharing a Memory hold their bytes
// until they end; a step that would pass the server's limit fails busy,
// and Admit refuses a run that might.
func TestMemoryBudget(t *testing.T) {
	calls := 0
	cat := budgetCatalog(t, &calls)
	release := make(chan struct{})
	held := make(chan struct{})
	hold := fakeTool(t, "hold", "", "", func(context.Context, map[string]any) (*registry.Result, error) {
		close(held)
		<-release
		return structured(map[string]any{}), nil
	})
	if err := cat.Add(hold); err != nil {
		t.Fatal(err)
	}
	// A test binary's heap is some megabytes: the limits are above it.
	te := newTestEngine(t, cat, Limits{MaxMemoryBytes: 48 << 20, MaxRunBytes: 32 << 20})
	if issue := te.Admit(); issue != nil {
		t.Fatalf("an idle engine refuses a run: %v", issue)
	}
	done := make(chan *Envelope)
	go func() {
		done <- te.With(RunOptions{}).Run(context.Background(), mustRequest(t, `{"plan":{"steps":[
			{"id":"a","tool":"big","arguments":{"n":20000000}},{"id":"h","tool":"hold"}]}}`))
	}()
	<-held
	issue := te.Admit()
	if issue == nil || issue.Code != CodeBusy || !strings.Contains(issue.Message, "limits.max_memory_bytes") {
		t.Errorf("Admit with 20 MB held of 48 MiB, 32 MiB a run = %+v, want busy", issue)
	}
	env := te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"id":"x","tool":"big","arguments":{"n":31000000}}]}}`))
	if e := stepError(env, "x"); e == nil || e.Code != CodeBusy {
		t.Errorf("a step past the server's budget = %+v, want busy", e)
	}
	close(release)
	if env := <-done; !env.Artifact.Success {
		t.Fatalf("the holding run failed: %v", errorCodes(env))
	}
	if used := te.MemoryHeld(); used != 0 {
		t.Errorf("the server's budget still holds %d bytes after every run ended", used)
	}
	if issue := te.Admit(); issue != nil {
		t.Errorf("Admit after the runs ended = %v", issue)
	}
}

// previewJSON must be the start of json.Marshal's output, however large
// the value, and cost no more than the preview.
func TestPreviewJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := rng.IntN(7); {
		case k == 0 || depth > 3:
			return strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(300)) + `"<&>\`
		case k == 1:
			return rng.NormFloat64() * 1e6
		case k == 2:
			return rng.IntN(2) == 0
		case k == 3:
			return nil
		case k == 4:
			m := map[string]any{}
			for range rng.IntN(6) {
				m[fmt.Sprint("k", rng.IntN(100))] = gen(depth + 1)
			}
			return m
		default:
			var a []any
			for range rng.IntN(6) {
				a = append(a, gen(depth+1))
			}
			return a
		}
	}
	for range 500 {
		v := gen(0)
		full, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 7, 100, 1024} {
			want := full[:min(n, len(full))]
			if got := previewJSON(v, n); string(got) != string(want) {
				t.Fatalf("previewJSON(%s, %d) = %s, want %s", full, n, got, want)
			}
		}
	}
	huge := map[string]any{"a": strings.Repeat("x", 50<<20)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	previewJSON(huge, 1024)
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("a 1 KiB preview of 50 MB allocated %d bytes", grown)
	}
}
