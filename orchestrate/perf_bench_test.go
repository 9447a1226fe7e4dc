package orchestrate

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/registry"
)

// The benchmarks in this file are the engine's part of BENCHMARKS.md:
// overhead per step, fan-out and memory per in-flight step. Compare runs
// with benchstat; nothing here asserts a time.

// BenchmarkOverhead validates, runs and builds the envelope of chains of 1
// to 1,000 no-op steps (each step uses the output of the one before it), and
// reports the cost per step: ns/step and allocs/step.
func BenchmarkOverhead(b *testing.B) {
	for _, n := range []int{1, 12, 100, 1000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			e := NewEngine(Options{Tools: noopCatalog(b), Limits: Limits{MaxSteps: n, MaxTemplates: 4 * n}})
			req := chainPlan(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			for b.Loop() {
				if env := e.Run(ctx, req); !env.Artifact.Success {
					b.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			per := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/step")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/per, "allocs/step")
		})
	}
}

// sleepCatalog has a tool "sleep" that waits for its ms argument or until
// its context ends.
func sleepCatalog(b testing.TB) *registry.Catalog {
	return registry.NewCatalog(fakeTool(b, "sleep",
		`{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`,
		`{"type":"object","properties":{"slept_ms":{"type":"integer"}}}`,
		func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			ms, _ := args["ms"].(float64)
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return structured(map[string]any{"slept_ms": ms}), nil
		}))
}

// fanoutPlan is one parallel group of n children that each sleep ms.
func fanoutPlan(b testing.TB, n, ms int) *Request {
	children := make([]string, n)
	for i := range children {
		children[i] = fmt.Sprintf(`{"id":"c%d","tool":"sleep","arguments":{"ms":%d}}`, i, ms)
	}
	return mustRequest(b, fmt.Sprintf(`{"max_parallel":%d,"plan":{"steps":[{"id":"g","parallel":[%s]}]}}`, n, strings.Join(children, ",")))
}

// BenchmarkFanout runs a parallel group of N children that each sleep 50 ms
// with max_parallel N. The ideal is 50 ms whatever N; the report says how
// far above it the group ends (overhead-ms).
func BenchmarkFanout(b *testing.B) {
	const sleep = 50
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		b.Run(fmt.Sprintf("children=%d", n), func(b *testing.B) {
			e := NewEngine(Options{Tools: sleepCatalog(b), Limits: Limits{MaxSteps: n, MaxParallel: n}})
			req := fanoutPlan(b, n, sleep)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if env := e.Run(ctx, req); !env.Artifact.Success {
					b.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
				}
			}
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perOp/1e6-sleep, "overhead-ms")
		})
	}
}

// BenchmarkInflightMemory holds 1,000 orchestrations, each blocked in 4
// parallel steps, and reports the memory each in-flight step holds: the
// growth of the heap and of goroutine stacks over an idle baseline, divided
// by the 4,000 steps (bytes/step), and the goroutines per step.
func BenchmarkInflightMemory(b *testing.B) {
	const runs, width = 1000, 4
	var blocked atomic.Int64
	release := make(chan struct{})
	var mu sync.Mutex
	tools := registry.NewCatalog(fakeTool(b, "block",
		`{"type":"object","properties":{"n":{"type":"integer"}}}`,
		`{"type":"object","properties":{"n":{"type":"integer"}}}`,
		func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			mu.Lock()
			ch := release
			mu.Unlock()
			blocked.Add(1)
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return structured(map[string]any{"n": args["n"]}), nil
		}))
	e := NewEngine(Options{Tools: tools})
	children := make([]string, width)
	for i := range children {
		children[i] = fmt.Sprintf(`{"id":"b%d","tool":"block","arguments":{"n":%d}}`, i, i)
	}
	plan := `{"plan":{"steps":[{"id":"g","parallel":[` + strings.Join(children, ",") + `]}]}}`
	ctx := context.Background()
	b.ReportAllocs()
	var heap, total, goroutines float64
	for b.Loop() {
		b.StopTimer()
		reqs := make([]*Request, runs)
		for i := range reqs {
			reqs[i] = mustRequest(b, plan)
		}
		mu.Lock()
		release = make(chan struct{})
		mu.Unlock()
		blocked.Store(0)
		var before, during runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		b.StartTimer()

		var wg sync.WaitGroup
		for _, req := range reqs {
			wg.Go(func() {
				if env := e.Run(ctx, req); !env.Artifact.Success {
					b.Errorf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
				}
			})
		}
		for blocked.Load() < runs*width {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&during)
		g1 := runtime.NumGoroutine()
		b.StartTimer()
		mu.Lock()
		close(release)
		mu.Unlock()
		wg.Wait()

		steps := float64(runs * width)
		heap += float64(int64(during.HeapInuse)-int64(before.HeapInuse)) / steps
		total += float64(int64(during.HeapInuse+during.StackInuse)-int64(before.HeapInuse+before.StackInuse)) / steps
		goroutines += float64(g1-g0) / steps
	}
	n := float64(b.N)
	b.ReportMetric(total/n, "bytes/step")
	b.ReportMetric(heap/n, "heap-bytes/step")
	b.ReportMetric(goroutines/n, "goroutines/step")
}
