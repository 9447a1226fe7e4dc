package server_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/duration"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// queuedRuns is how many one-step background runs BenchmarkBackgroundQueue
// queues.
const queuedRuns = 1000

// BenchmarkBackgroundQueue runs 1,000 queued one-step background runs
// through a server, with the default limits (64 plans at once).
//
// store=sqlite is the in-process queue: 16 clients start the runs;
// claim-p50-ms and claim-p99-ms are how long a start waits for its
// answer (a slot, the checks, the run handed to its goroutine), runs/s
// the throughput from the first start to the last run's end.
//
// store=postgres is the queue across replicas: the 1,000 runs are those of
// a replica that died (interrupted, their requests kept), and a new
// replica takes them up. first-claim-ms is how long it took the first
// (its first lease sweep comes Lease/3 = 1 s after it opened), runs/s the
// throughput from the first claim to the last run's end.
//
// Run it with -benchtime 1x -count N.
func BenchmarkBackgroundQueue(b *testing.B) {
	b.Run("store=sqlite", func(b *testing.B) {
		var finished atomic.Int64
		all := make(chan struct{})
		hooks := &orchestrate.Hooks{RunFinished: func(orchestrate.RunFinishedInfo) {
			if finished.Add(1) == queuedRuns {
				close(all)
			}
		}}
		var p probe
		app, err := server.New(b.Context(), config.Default(), server.Options{Store: filepath.Join(b.TempDir(), "orchestra.db"), Tools: []registry.Tool{p.tool(b, "probe")}, Hooks: hooks})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { app.Close() })
		sessions := connectSessions(b, app, 16)
		params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: map[string]any{"background": true, "plan": map[string]any{"steps": []any{
			map[string]any{"tool": "probe", "arguments": map[string]any{"label": "hi"}},
		}}}}
		for b.Loop() { // once: -benchtime 1x
			var mu sync.Mutex
			var lat []time.Duration
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for _, cs := range sessions {
				wg.Go(func() {
					for next.Add(1) <= queuedRuns {
						t := time.Now()
						res, err := cs.CallTool(b.Context(), params)
						d := time.Since(t)
						if err != nil || res.IsError {
							b.Errorf("starting a background run: %v %v", err, res)
							return
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			<-all
			elapsed := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "claim-p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "claim-p99-ms")
			b.ReportMetric(queuedRuns/elapsed.Seconds(), "runs/s")
		}
	})

	b.Run("store=postgres", func(b *testing.B) {
		url := pgtest.URL(b)
		for b.Loop() { // once: -benchtime 1x
			b.StopTimer()
			seedDeadReplica(b, url)
			var resumed, finished atomic.Int64
			var first atomic.Pointer[time.Time]
			all := make(chan struct{})
			hooks := &orchestrate.Hooks{
				RunResumed: func(i orchestrate.RunResumedInfo) {
					resumed.Add(1)
					first.CompareAndSwap(nil, &i.At)
				},
				RunFinished: func(orchestrate.RunFinishedInfo) {
					if finished.Add(1) == queuedRuns {
						close(all)
					}
				},
			}
			var p probe
			cfg := config.Default()
			cfg.Store.Lease = duration.Duration(3 * time.Second)
			b.StartTimer()
			opened := time.Now()
			app, err := server.New(b.Context(), cfg, server.Options{Store: url, Tools: []registry.Tool{p.tool(b, "probe")}, Hooks: hooks})
			if err != nil {
				b.Fatal(err)
			}
			<-all
			end := time.Now()
			app.Close()
			b.StopTimer()
			if n := resumed.Load(); n != queuedRuns {
				b.Fatalf("%d runs taken up, want %d", n, queuedRuns)
			}
			b.ReportMetric(ms(first.Load().Sub(opened)), "first-claim-ms")
			b.ReportMetric(queuedRuns/end.Sub(*first.Load()).Seconds(), "runs/s")
			b.StartTimer()
		}
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// seedDeadReplica queues 1,000 one-step background runs of a replica
// that then stops without running them: they are interrupted, their
// requests kept.
func seedDeadReplica(b *testing.B, url string) {
	ctx := b.Context()
	dead, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := json.RawMessage(`{"plan":{"steps":[{"id":"a","tool":"probe","arguments":{"label":"hi"}}]}}`)
	for i := range queuedRuns {
		id := fmt.Sprintf("orphan-%d-%d", time.Now().UnixNano(), i)
		if err := dead.QueueStartRun(ctx, store.Run{ExecID: id, Tool: "agent_orchestrate", StepCount: 1, StartedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
		if err := dead.QueueKeepRequest(ctx, id, req); err != nil {
			b.Fatal(err)
		}
		if err := dead.MarkBackground(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	if err := dead.Close(); err != nil { // marks its unfinished runs interrupted
		b.Fatal(err)
	}
}
