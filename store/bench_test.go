package store

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRun records one whole run: StartRun, four RecordStep calls and
// FinishRun, as an orchestration of four steps writes it.
func BenchmarkRun(b *testing.B) {
	for _, mode := range []string{"memory", "file"} {
		b.Run(mode, func(b *testing.B) {
			path := Memory
			if mode == "file" {
				path = tempDB(b)
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
				if err := s.FinishRun(ctx, id, StatusSuccess, envelope, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
