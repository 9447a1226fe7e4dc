package records

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
)

// storeTimeout bounds how long a run waits for room in the store's write
// queue; the writes themselves happen off the run's path.
const storeTimeout = 10 * time.Second

// Recorder keeps the execution records through the engine's hooks: it
// queues a run's start, each step as it starts and as it ends (every step
// ends once, skipped ones too, with its final record), which the store's
// writer commits in the background, and the run's end with the envelope,
// whose commit it waits for (finishWait at most): the response comes after
// it. Reads of the store wait for the queued writes, so a record read after
// a response is complete.
type Recorder struct {
	st  *store.Store
	log *slog.Logger
}

// NewRecorder returns the recorder of the runs into st.
func NewRecorder(st *store.Store, log *slog.Logger) *Recorder {
	return &Recorder{st: st, log: log}
}

// Hooks returns the engine hooks that write the records.
func (rc *Recorder) Hooks() *orchestrate.Hooks {
	return &orchestrate.Hooks{
		RunStarted:  rc.runStarted,
		StepStarted: func(i orchestrate.StepStartedInfo) { rc.step(i.Run, i.Step) },
		StepEnded:   func(i orchestrate.StepEndedInfo) { rc.step(i.Run, i.Step) },
		RunPaused:   rc.runPaused,
		RunFinished: rc.runFinished,
	}
}

func (rc *Recorder) runStarted(i orchestrate.RunStartedInfo) {
	info := i.Run
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	run := store.Run{ExecID: info.ExecID, RequestID: info.IDs.RequestID, Owner: info.IDs.Owner, Tool: info.Source, StartedAt: info.StartedAt, StepCount: info.Leaves,
		UserID: info.IDs.UserID, Tenant: info.IDs.Tenant, ParentExecID: info.ParentExecID}
	if run.Tool == "" {
		run.Tool = orchestrate.ToolName
	}
	if info.Plan != nil {
		run.Plan = marshal(info.Plan)
		run.FirstStep = firstStep(info.Plan)
	}
	run.Goal = info.Goal
	if err := rc.st.QueueStartRun(ctx, run); err != nil {
		rc.warn("recording the start of a run", info, err)
	}
}

func (rc *Recorder) step(info *orchestrate.RunInfo, rec *orchestrate.StepRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	// A step's output is marshaled here, not by the store's writer: a
	// later step may be handed the same value as an argument, and its tool
	// may change it.
	if err := rc.st.QueueRecordStep(ctx, stepRecord(info.ExecID, rec)); err != nil {
		rc.warn("recording a step", info, err)
	}
}

func (rc *Recorder) runFinished(i orchestrate.RunFinishedInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	env := i.Envelope
	status := store.StatusFailed
	if env != nil && env.Artifact != nil {
		switch env.Artifact.Status {
		case orchestrate.StatusSuccess:
			status = store.StatusSuccess
		case orchestrate.StatusPartial:
			status = store.StatusPartial
		case orchestrate.StatusCancelled:
			status = store.StatusCancelled
		}
	}
	// The envelope is encoded here too: the CLI's ask adds the model's answer
	// to it after the run, and the record keeps the run's own. The step
	// count is the run's at its end: a prompt's plan and an agent's loop
	// have none yet when they start.
	if err := rc.st.QueueFinishRun(ctx, i.Run.ExecID, status, marshal(env), time.Time{}, i.Run.Leaves); err != nil {
		rc.warn("recording the end of a run", i.Run, err)
		return
	}
	// The end is committed, with everything queued before it, before the
	// run answers, so that a run that was answered is in the records as
	// finished even if the process is killed right after. (The writer
	// commits at once for a waiting caller, the ends of concurrent runs
	// together.) A commit that takes longer than finishWait — the database
	// locked by another process, a stalled disk — does not hold the answer
	// back: the write stays queued and is committed when it can be.
	wctx, wcancel := context.WithTimeout(context.Background(), finishWait)
	defer wcancel()
	if err := rc.st.Flush(wctx); err != nil {
		rc.log.Debug("answering before the end of the run is committed", "request_id", i.Run.IDs.RequestID, "exec_id", i.Run.ExecID, "err", err)
	}
}

// finishWait bounds how long a run's answer waits for the commit of its
// end.
const finishWait = 250 * time.Millisecond

func (rc *Recorder) warn(what string, info *orchestrate.RunInfo, err error) {
	rc.log.Warn(what, "request_id", info.IDs.RequestID, "exec_id", info.ExecID, "step_id", "", "tool", info.Source, "err", err)
}

func stepRecord(execID string, rec *orchestrate.StepRecord) store.StepRecord {
	st := store.StepRecord{
		ExecID: execID, StepID: rec.ID, StepExecID: rec.ExecID, Index: rec.Index, Path: rec.Path, Kind: rec.Type, Tool: rec.Tool,
		Status: rec.Status, DurationMS: rec.DurationMS, Attempts: rec.Attempts,
	}
	if rec.Arguments != nil {
		st.Arguments = marshal(rec.Arguments)
	}
	if rec.StartedAt != nil {
		st.StartedAt = *rec.StartedAt
	}
	if rec.Output != nil {
		st.Output = marshal(rec.Output)
	}
	if rec.Error != nil {
		st.Error = marshal(rec.Error)
	}
	return st
}

// firstStep describes the first step of plan for a list of runs: "id
// (tool)", "id (parallel)" or "id (for_each)"; "" for a plan without steps.
func firstStep(plan *orchestrate.Plan) string {
	if len(plan.Steps) == 0 {
		return ""
	}
	st := plan.Steps[0]
	kind := st.Tool
	switch {
	case st.Parallel != nil:
		kind = "parallel"
	case st.Do != nil:
		kind = "for_each"
	}
	return st.ID + " (" + kind + ")"
}

func marshal(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "not encodable as JSON: " + err.Error()})
	}
	return data
}
