package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
)

func Example() {
	ctx := context.Background()
	s, err := store.Open(ctx, store.Memory, store.Options{Retention: store.Retention{MaxRuns: 1000}})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	_ = s.StartRun(ctx, store.Run{ExecID: "e1", Tool: "agent_orchestrate", StartedAt: start, StepCount: 1,
		Plan: json.RawMessage(`{"steps":[{"id":"greet","tool":"echo"}]}`)})
	_ = s.RecordStep(ctx, store.StepRecord{ExecID: "e1", StepID: "greet", Tool: "echo", Status: "success",
		Attempts: 1, Output: json.RawMessage(`{"text":"hello"}`)})
	_ = s.FinishRun(ctx, "e1", store.StatusSuccess, json.RawMessage(`{"artifact_id":"a1"}`), start.Add(42*time.Millisecond), 0)

	run, steps, err := s.Get(ctx, "e1")
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.DurationMS, "ms,", len(steps), "step:", steps[0].StepID, string(steps[0].Output))

	runs, next, _ := s.List(ctx, store.ListOptions{Limit: 10})
	fmt.Println(len(runs), "run listed, more:", next != "")
	// Output:
	// success 42 ms, 1 step: greet {"text":"hello"}
	// 1 run listed, more: false
}
