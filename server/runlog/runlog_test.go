package runlog

import (
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// The lines of the hooks a run calls around a pause and at an engine
// error, and none below the enabled level: a line is not even built then.
func TestRunLogPauseAndEngineError(t *testing.T) {
	type line struct {
		level slog.Level
		msg   string
	}
	var got []line
	built := 0
	h := runLog{
		enabled: func(l slog.Level) bool { return l >= slog.LevelInfo },
		emit: func(l slog.Level, msg string, at []slog.Attr) {
			built++
			got = append(got, line{l, msg})
			if at[0].Key != "request_id" || at[1].Value.String() != "x1" {
				t.Errorf("line %q without the run's ids: %v", msg, at)
			}
		},
	}.hooks()
	info := &orchestrate.RunInfo{ExecID: "x1"}
	h.RunPaused(orchestrate.RunPausedInfo{Run: info})
	h.RunResumed(orchestrate.RunResumedInfo{Run: info})
	h.StepStarted(orchestrate.StepStartedInfo{Run: info, Step: &orchestrate.StepRecord{ID: "a", Type: "tool"}}) // debug: not built
	h.RunFinished(orchestrate.RunFinishedInfo{Run: info, Err: errors.New("state machine: event merged inappropriate in current state plan_init")})
	want := []line{
		{slog.LevelInfo, "run paused: waiting for the client"},
		{slog.LevelInfo, "run resumed"},
		{slog.LevelError, "engine error"},
		{slog.LevelWarn, "run finished"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines %v, want %v", got, want)
	}
	if built != len(want) {
		t.Errorf("%d lines built, want %d", built, len(want))
	}
}
