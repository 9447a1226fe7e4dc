package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Pauses keep paused runs, and the requests of runs that may be resumed,
// in the execution store: a paused run survives a restart of orchestra.
// A run is read in its caller's scope: an authenticated caller resumes
// only its own runs (another's are unknown_run).
type Pauses struct {
	st  *store.Store
	log *slog.Logger
}

// NewPauses returns the pauses of the runs kept in st.
func NewPauses(st *store.Store, log *slog.Logger) *Pauses {
	return &Pauses{st: st, log: log}
}

// Keep implements orchestrate.Pauses.
func (p *Pauses) Keep(ctx context.Context, execID string, req *orchestrate.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := p.st.QueueKeepRequest(ctx, execID, marshal(req)); err != nil {
		p.log.Warn("keeping the request of a run", "exec_id", execID, "err", err)
	}
}

// Pause implements orchestrate.Pauses.
func (p *Pauses) Pause(ctx context.Context, execID string, req *orchestrate.Request, pending []*orchestrate.PendingCall, loops map[string]*orchestrate.LoopPause, expires time.Time) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	var lp json.RawMessage
	if len(loops) > 0 {
		lp = marshal(loops)
	}
	return p.st.Pause(ctx, execID, marshal(req), marshal(pending), lp, expires)
}

// Load implements orchestrate.Pauses.
func (p *Pauses) Load(ctx context.Context, execID string) (*orchestrate.Checkpoint, error) {
	res, err := p.st.ResumableIn(ctx, callerScope(ctx), execID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, orchestrate.ErrNoCheckpoint
	}
	if err != nil {
		return nil, err
	}
	req, issues := orchestrate.DecodeRequest(res.Request)
	if len(issues) > 0 {
		return nil, fmt.Errorf("the run's stored request does not decode: %v", issues[0])
	}
	cp := &orchestrate.Checkpoint{ExecID: execID, Status: string(res.Run.Status), Request: req, ExpiresAt: res.ExpiresAt, Claims: res.Claims, Steps: map[string]*orchestrate.StepRecord{}}
	if res.Paused {
		cp.Status = orchestrate.CheckpointPaused
		if err := json.Unmarshal(res.Pending, &cp.Pending); err != nil {
			return nil, fmt.Errorf("the run's pending calls do not decode: %w", err)
		}
		if len(res.Loops) > 0 {
			if err := json.Unmarshal(res.Loops, &cp.Loops); err != nil {
				return nil, fmt.Errorf("the run's paused tool loops do not decode: %w", err)
			}
		}
	}
	for _, s := range res.Steps {
		if s.Tool == "" { // a group: merged again from its children
			continue
		}
		rec := &orchestrate.StepRecord{ID: s.StepID, ExecID: s.StepExecID, Index: s.Index, Path: s.Path, Type: "tool", Tool: s.Tool, Status: s.Status, Attempts: s.Attempts, DurationMS: s.DurationMS}
		if !s.StartedAt.IsZero() {
			at := s.StartedAt
			rec.StartedAt = &at
		}
		if len(s.Output) > 0 && json.Unmarshal(s.Output, &rec.Output) != nil {
			continue // an output the record could not keep is not reused
		}
		if len(s.Error) > 0 {
			rec.Error = &orchestrate.Error{}
			_ = json.Unmarshal(s.Error, rec.Error)
		}
		switch rec.Status {
		case orchestrate.StatusSuccess, orchestrate.StatusPartial, orchestrate.StatusFailed, orchestrate.StatusSkipped, orchestrate.StatusCancelled:
			cp.Steps[rec.ID] = rec
		}
	}
	return cp, nil
}

// Claim implements orchestrate.Pauses.
func (p *Pauses) Claim(ctx context.Context, cp *orchestrate.Checkpoint, event string, steps []string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	err := p.st.Claim(ctx, cp.ExecID, cp.Claims, event, marshal(map[string]any{"results": steps}))
	if errors.Is(err, store.ErrClaimed) {
		return orchestrate.ErrClaimed
	}
	return err
}

// callerScope is whose runs the caller of ctx may resume: an authenticated
// caller's own (withCaller put its id in ctx), or every run for the
// machine's own callers, as ownerScope decides for reads.
func callerScope(ctx context.Context) store.Scope {
	if ids, ok := toolcontext.IDsFrom(ctx); ok && ids.Owner != "" {
		return store.OwnerScope(ids.Owner)
	}
	return store.Scope{}
}

// runPaused records the steps that wait for the client as such, and
// waits (briefly) for the records to be committed, like a run's end.
func (rc *Recorder) runPaused(i orchestrate.RunPausedInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var walk func(rs []*orchestrate.StepRecord)
	walk = func(rs []*orchestrate.StepRecord) {
		for _, rec := range rs {
			if rec.Status == orchestrate.StatusAwaitingClient {
				if err := rc.st.QueueRecordStep(ctx, stepRecord(i.Run.ExecID, rec)); err != nil {
					rc.warn("recording a step that waits for the client", i.Run, err)
				}
			}
			walk(rec.Children)
		}
	}
	if i.Envelope != nil && i.Envelope.Artifact != nil {
		walk(i.Envelope.Artifact.Steps)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), finishWait)
	defer wcancel()
	_ = rc.st.Flush(wctx)
}
