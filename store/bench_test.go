package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// BenchmarkRun records one whole run: StartRun, four RecordStep calls and
// FinishRun, as an orchestration of four steps writes it (on PostgreSQL
// the step and finish writes are fenced).
func BenchmarkRun(b *testing.B) {
	for _, mode := range []string{"memory", "file", "postgres"} {
		b.Run(mode, func(b *testing.B) {
			path := Memory
			switch mode {
			case "file":
				path = tempDB(b)
			case "postgres":
				path = pgtest.URL(b)
			}
			s := openTest(b, path, Options{})
			ctx := b.Context()
			plan := json.RawMessage(`{"steps":[{"id":"a","tool":"echo","arguments":{"text":"hello"}},{"id":"b","tool":"echo"},{"id":"c","tool":"echo"},{"id":"d","tool":"echo"}]}`)
			output := json.RawMessage(`{"text":"hello world"}`)
			envelope := json.RawMessage(`{"artifact_id":"x","artifact":{"status":"success","success":true,"steps":[]}}`)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := fmt.Sprint("bench-", i)
				i++
				now := time.Now()
				if err := s.StartRun(ctx, Run{ExecID: id, Tool: "agent_orchestrate", StartedAt: now, StepCount: 4, Plan: plan}); err != nil {
					b.Fatal(err)
				}
				for j, step := range []string{"a", "b", "c", "d"} {
					if err := s.RecordStep(ctx, StepRecord{ExecID: id, StepID: step, Index: j, Tool: "echo",
						Status: "success", StartedAt: now, DurationMS: 1, Attempts: 1, Output: output}); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.FinishRun(ctx, id, StatusSuccess, envelope, time.Time{}, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOneStepRun records the four writes of a one-step run (start,
// step started, step ended, finish), as the server's recorder does, with
// the synchronous methods, which wait for each write's commit, and with the
// queued ones, which return once the write is queued (the time includes
// the final Flush, so the commits are paid for). serial is one caller;
// parallel is 8 callers per CPU, like concurrent clients. tx/run is how
// many transactions a run cost.
func BenchmarkOneStepRun(b *testing.B) {
	plan := json.RawMessage(`{"steps":[{"id":"a","tool":"echo","arguments":{"text":"hello"}}]}`)
	output := json.RawMessage(`{"text":"hello"}`)
	envelope := json.RawMessage(`{"artifact_id":"x","artifact":{"status":"success","success":true,"steps":[{"id":"a","status":"success","output":{"text":"hello"}}]}}`)
	record := func(ctx context.Context, s *Store, queued bool, id string) error {
		start, step, finish := s.StartRun, s.RecordStep, s.FinishRun
		if queued {
			start, step, finish = s.QueueStartRun, s.QueueRecordStep, s.QueueFinishRun
		}
		now := time.Now()
		if err := start(ctx, Run{ExecID: id, Tool: "agent_orchestrate", StartedAt: now, StepCount: 1, Plan: plan}); err != nil {
			return err
		}
		st := StepRecord{ExecID: id, StepID: "a", Tool: "echo", Status: "running", StartedAt: now}
		if err := step(ctx, st); err != nil {
			return err
		}
		st.Status, st.Attempts, st.Output = "success", 1, output
		if err := step(ctx, st); err != nil {
			return err
		}
		return finish(ctx, id, StatusSuccess, envelope, time.Time{}, 0)
	}
	for _, mode := range []string{"memory", "file"} {
		for _, writes := range []string{"sync", "queued"} {
			for _, callers := range []string{"serial", "parallel"} {
				b.Run("store="+mode+"/writes="+writes+"/"+callers, func(b *testing.B) {
					path := Memory
					if mode == "file" {
						path = tempDB(b)
					}
					s := openTest(b, path, Options{})
					ctx := b.Context()
					queued := writes == "queued"
					var n atomic.Int64
					b.ReportAllocs()
					b.ResetTimer()
					if callers == "serial" {
						for range b.N {
							if err := record(ctx, s, queued, fmt.Sprint("run-", n.Add(1))); err != nil {
								b.Fatal(err)
							}
						}
					} else {
						b.SetParallelism(8)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if err := record(ctx, s, queued, fmt.Sprint("run-", n.Add(1))); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					if err := s.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					st, err := s.Stats(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if st.Writes != 4*n.Load() {
						b.Fatalf("%d writes for %d runs", st.Writes, n.Load())
					}
					b.ReportMetric(float64(st.Transactions)/float64(n.Load()), "tx/run")
				})
			}
		}
	}
}

// BenchmarkTakeOrphans takes up 1,000 queued background runs of a dead
// replica on PostgreSQL, one per statement as the server does, with one
// taker and with four racing (replicas): claim-p50-µs and claim-p99-µs
// are the latency of one claim, claims/s the throughput. Each iteration
// queues the 1,000 runs afresh (outside the timer); run it with
// -benchtime 1x -count N.
func BenchmarkTakeOrphans(b *testing.B) {
	const runs = 1000
	url := pgtest.URL(b)
	ctx := b.Context()
	for _, takers := range []int{1, 4} {
		b.Run(fmt.Sprintf("takers=%d", takers), func(b *testing.B) {
			stores := make([]*Store, takers)
			for i := range stores {
				stores[i] = openTest(b, url, Options{})
			}
			var lat []time.Duration
			var total time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				// The runs of the last iteration, taken and never resumed,
				// would come back once their takeover lease lapsed.
				if _, err := stores[0].writer.ExecContext(ctx, `DELETE FROM runs WHERE exec_id LIKE 'orphan-%'`); err != nil {
					b.Fatal(err)
				}
				seedOrphans(b, url, n, runs)
				b.StartTimer()
				start := time.Now()
				var mu sync.Mutex
				var wg sync.WaitGroup
				for _, s := range stores {
					wg.Go(func() {
						for {
							t := time.Now()
							got, err := s.TakeOrphans(ctx, 1)
							d := time.Since(t)
							if err != nil {
								b.Error(err)
								return
							}
							if len(got) == 0 {
								return
							}
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				total += time.Since(start)
				n++
			}
			if len(lat) != n*runs {
				b.Fatalf("took %d runs up, want %d", len(lat), n*runs)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "claim-p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "claim-p99-µs")
			b.ReportMetric(float64(len(lat))/total.Seconds(), "claims/s")
		})
	}
}

// seedOrphans queues runs one-step background runs (ids from batch) of a
// replica that then stops: they are interrupted, with their requests kept.
func seedOrphans(b testing.TB, url string, batch, runs int) {
	ctx := b.Context()
	dead, err := Open(ctx, url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := json.RawMessage(`{"plan":{"steps":[{"id":"a","tool":"probe","arguments":{"label":"hi"}}]}}`)
	for i := range runs {
		id := fmt.Sprintf("orphan-%d-%d-%d", time.Now().UnixNano(), batch, i)
		if err := dead.QueueStartRun(ctx, Run{ExecID: id, Tool: "agent_orchestrate", StepCount: 1, StartedAt: time.Now()}); err != nil {
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
	// As autovacuum would have by then: the plans of a queue that grew
	// since the last statistics scan the whole queue for each claim.
	if _, err := openTest(b, url, Options{}).writer.ExecContext(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}
