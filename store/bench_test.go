package store

import (
	"context"
	"encoding/json"
	"fmt"
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
