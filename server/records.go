package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
)

// ExecutionsURI is the MCP resource that lists execution records, newest
// first; RecordURI names one record.
const ExecutionsURI = "orchestra://executions"

// RecordURI is the MCP resource of the execution record of run execID.
func RecordURI(execID string) string { return ExecutionsURI + "/" + execID }

// openStore opens the execution store at path: opts.Store, else the
// configuration's store.path, else memory.
func openStore(ctx context.Context, cfg *config.Config, path string, log *slog.Logger) (*store.Store, error) {
	if path == "" {
		path = cfg.Store.Path
	}
	if path == "" {
		path = store.Memory
	}
	// A server asked to stop as it starts still opens its store: it
	// recovers the runs a crash left and closes cleanly.
	return store.Open(context.WithoutCancel(ctx), path, store.Options{
		Retention: store.Retention{MaxAge: cfg.Store.Retention.MaxAge.D(), MaxRuns: cfg.Store.Retention.MaxRuns},
		Logger:    log,
	})
}

// Store returns the app's execution store.
func (a *App) Store() *store.Store { return a.store }

// storeTimeout bounds how long a run waits for room in the store's write
// queue; the writes themselves happen off the run's path.
const storeTimeout = 10 * time.Second

// recorder is the engine observer that keeps the execution records: it
// queues a run's start at its first transition and each step as it starts
// and ends, which the store's writer commits in the background, and the
// run's end with the envelope, whose commit it waits for (finishWait at
// most): the response comes after it.
type recorder struct {
	st  *store.Store
	log *slog.Logger

	runs sync.Map // *orchestrate.RunInfo → *runRecord, from the first transition to the final one
}

// runRecord is what the recorder remembers of a run while it runs.
type runRecord struct {
	mu sync.Mutex
	// ended holds the status each step was recorded with when it ended, so
	// that the final pass writes only the steps that changed.
	ended map[string]string
}

func newRecorder(st *store.Store, log *slog.Logger) *recorder {
	return &recorder{st: st, log: log}
}

func (rc *recorder) observe(ev orchestrate.Event) {
	info := ev.Run
	if info == nil {
		return
	}
	final := ev.Transition.Event == orchestrate.EventFinal
	started, ended := stepStarted(ev), stepEnded(ev)
	v, known := rc.runs.Load(info)
	if !known {
		// The first transition of a run fires before any of its steps
		// starts: nothing else observes the run at the same time.
		v, known = rc.runs.LoadOrStore(info, &runRecord{})
	}
	rr := v.(*runRecord)
	if known && !final && !started && !ended {
		return // nothing to write: most transitions only move the state machine
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()

	if !known {
		run := store.Run{ExecID: info.ExecID, RequestID: info.IDs.RequestID, Owner: info.IDs.UserID, Tool: info.Source, StartedAt: info.StartedAt, StepCount: info.Leaves}
		if run.Tool == "" {
			run.Tool = orchestrate.ToolName
		}
		if info.Plan != nil {
			run.Plan = marshal(info.Plan)
		}
		if err := rc.st.QueueStartRun(ctx, run); err != nil {
			rc.warn("recording the start of a run", info, err)
		}
	}
	switch {
	case final:
		rc.runs.Delete(info)
		rr.mu.Lock()
		steps := rr.ended
		rr.mu.Unlock()
		rc.finish(ctx, info, ev.Envelope, steps)
	case started || ended:
		if ended {
			rr.mu.Lock()
			if rr.ended == nil {
				rr.ended = map[string]string{}
			}
			rr.ended[ev.Step.ID] = ev.Step.Status
			rr.mu.Unlock()
		}
		// A step's output is marshaled here, not by the store's writer:
		// a later step may be handed the same value as an argument, and
		// its tool may change it.
		if err := rc.st.QueueRecordStep(ctx, stepRecord(info.ExecID, ev.Step)); err != nil {
			rc.warn("recording a step", info, err)
		}
	}
}

func (rc *recorder) finish(ctx context.Context, info *orchestrate.RunInfo, env *orchestrate.Envelope, ended map[string]string) {
	status := store.StatusFailed
	if env != nil && env.Artifact != nil {
		// Every step ends in the record with its final state: steps a halt
		// skipped, or that ended after the plan had failed, fire no event.
		// Steps already recorded with their final status are not written again.
		var walk func([]*orchestrate.StepRecord)
		walk = func(recs []*orchestrate.StepRecord) {
			for _, rec := range recs {
				if st, ok := ended[rec.ID]; ok && st == rec.Status {
					walk(rec.Children)
					continue
				}
				if err := rc.st.QueueRecordStep(ctx, stepRecord(info.ExecID, rec)); err != nil {
					rc.warn("recording a step", info, err)
				}
				walk(rec.Children)
			}
		}
		walk(env.Artifact.Steps)
		switch env.Artifact.Status {
		case orchestrate.StatusSuccess:
			status = store.StatusSuccess
		case orchestrate.StatusPartial:
			status = store.StatusPartial
		}
	}
	// The envelope is encoded here too: the CLI's ask adds the model's answer
	// to it after the run, and the record keeps the run's own.
	if err := rc.st.QueueFinishRun(ctx, info.ExecID, status, marshal(env), time.Time{}); err != nil {
		rc.warn("recording the end of a run", info, err)
		return
	}
	// The end is committed, with everything queued before it, before the
	// run answers, so that a run that was answered is in the records as
	// finished even if the process is killed right after. (The writer
	// commits at once for a waiting caller, the ends of concurrent runs
	// together.) A commit that takes longer than finishWait — the database
	// locked by another process, a stalled disk — does not hold the answer
	// back: the write stays queued and is committed when it can be.
	wctx, cancel := context.WithTimeout(context.Background(), finishWait)
	defer cancel()
	if err := rc.st.Flush(wctx); err != nil {
		rc.log.Debug("answering before the end of the run is committed", "request_id", info.IDs.RequestID, "exec_id", info.ExecID, "err", err)
	}
}

// finishWait bounds how long a run's answer waits for the commit of its
// end.
const finishWait = 250 * time.Millisecond

func (rc *recorder) warn(what string, info *orchestrate.RunInfo, err error) {
	rc.log.Warn(what, "request_id", info.IDs.RequestID, "exec_id", info.ExecID, "step_id", "", "tool", info.Source, "err", err)
}

func stepRecord(execID string, rec *orchestrate.StepRecord) store.StepRecord {
	st := store.StepRecord{
		ExecID: execID, StepID: rec.ID, Index: rec.Index, Path: rec.Path, Tool: rec.Tool,
		Status: rec.Status, DurationMS: rec.DurationMS, Attempts: rec.Attempts,
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

func marshal(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "not encodable as JSON: " + err.Error()})
	}
	return data
}
