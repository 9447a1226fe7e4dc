package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/store"
)

// Background runs ("background": true) answer once their request passed
// its checks and go on without the call: over HTTP without its connection,
// over stdio for as long as the process lives. Each keeps the slot of
// limits.max_concurrent_plans its call took (so it counts in the fair
// share of its owner and tenant) and its request's budget tree until it
// ends; draining the server (SIGTERM) waits for it like for any run, then
// cancels it. {"await": ...} and {"cancel": ...} reach it by exec id, for
// its owner and tenant only; a run this process does not hold is read from
// the execution store.

// defaultAwait is how long an await without timeout_ms waits: well under
// the 60 s most clients give a request.
const defaultAwait = 30 * time.Second

// bgRuns are the background runs this process holds, by exec id.
type bgRuns struct {
	mu   sync.Mutex
	runs map[string]*bgRun
}

// bgRun is one background run.
type bgRun struct {
	info     atomic.Pointer[orchestrate.RunInfo] // the run's, from its first hook
	ended    atomic.Int64                        // tool steps that ended
	cancel   context.CancelFunc
	accepted chan struct{} // closed when the run passed its checks
	accept   sync.Once
	done     chan struct{} // closed when the run ended; result is set
	result   *mcp.CallToolResult
}

func (rs *bgRuns) put(execID string, b *bgRun) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.runs == nil {
		rs.runs = map[string]*bgRun{}
	}
	rs.runs[execID] = b
}

func (rs *bgRuns) get(execID string) *bgRun {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.runs[execID]
}

func (rs *bgRuns) remove(execID string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.runs, execID)
}

// hooks follow the run the background call started (not the runs nested
// under it): its exec id, when it passed its checks, its steps' ends.
func (b *bgRun) hooks(rs *bgRuns) *orchestrate.Hooks {
	first := func(info *orchestrate.RunInfo) bool {
		if b.info.CompareAndSwap(nil, info) {
			rs.put(info.ExecID, b)
			return true
		}
		return b.info.Load() == info
	}
	accept := func() { b.accept.Do(func() { close(b.accepted) }) }
	return &orchestrate.Hooks{
		RunStarted: func(i orchestrate.RunStartedInfo) {
			if first(i.Run) && i.Planning {
				accept() // a prompt was checked; planning is part of the run
			}
		},
		RunResumed: func(i orchestrate.RunResumedInfo) {
			if first(i.Run) {
				accept()
			}
		},
		PlanReady: func(i orchestrate.PlanReadyInfo) {
			if b.info.Load() == i.Run {
				accept()
			}
		},
		StepEnded: func(i orchestrate.StepEndedInfo) {
			if b.info.Load() == i.Run && (i.Step.Type == "tool" || i.Step.Type == "agent") {
				b.ended.Add(1)
			}
		},
	}
}

// heldSlot is the slot and in-flight count a call took (track): released
// when the call returns, unless a background run took them over.
type heldSlot struct {
	mu       sync.Mutex
	release  func()
	released bool
}

type heldSlotKey struct{}

// take hands the slot over to the caller, who must call the returned
// function once; nil when there is none to take.
func (h *heldSlot) take() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.released = true
	return h.release
}

// done releases the slot unless it was taken.
func (h *heldSlot) done() {
	if f := h.take(); f != nil {
		f()
	}
}

// startBackground runs start on a context of its own and answers as soon
// as the run passed its checks, with its running envelope; a request that
// fails them is answered with its envelope, as without background.
func (a *App) startBackground(ctx context.Context, req *mcp.CallToolRequest, e *orchestrate.Engine, start orchestrate.StartFunc) *mcp.CallToolResult {
	// Its place among the caller's, the tenant's and the server's
	// background runs, or queue_full (bglimits.go).
	unreserve, refused := a.reserveBackground(ctx, req, e)
	if refused != nil {
		return refused
	}
	// The call's slot and its place among the running plans go with the
	// run: draining waits for it.
	var release func()
	if h, ok := ctx.Value(heldSlotKey{}).(*heldSlot); ok {
		release = h.take()
	}
	if release == nil {
		a.plans.add()
		release = a.plans.done
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopDrain := context.AfterFunc(a.drain, cancel)
	b := &bgRun{cancel: cancel, accepted: make(chan struct{}), done: make(chan struct{})}
	be := e.With(orchestrate.RunOptions{Hooks: b.hooks(&a.bg)})
	go func() {
		defer unreserve()
		defer release()
		defer stopDrain()
		defer cancel()
		b.result = start(bctx, be)
		close(b.done)
		if info := b.info.Load(); info != nil {
			a.bg.remove(info.ExecID)
		}
	}()
	select {
	case <-b.accepted:
		return orchestrate.ResultFor(e.RunningEnvelope(b.info.Load(), int(b.ended.Load())), req.ProtocolVersion())
	case <-b.done:
		return b.result
	}
}

// control answers await and cancel.
func (a *App) control(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
	id, path := "", "await.exec_id"
	if r.Await != nil {
		id = r.Await.ExecID
	} else {
		id, path = r.Cancel.ExecID, "cancel.exec_id"
	}
	scope := tenancy.CallerScope(req.Extra)
	b := a.bg.get(id)
	if b != nil {
		if !scope.SeesRun(runOf(b.info.Load())) {
			b = nil // the same answer as for a run that does not exist
		}
	}
	if b == nil {
		return a.recorded(ctx, e, req, scope, id, path)
	}
	wait := a.awaitTimeout(r)
	if r.Cancel != nil {
		b.cancel()
		wait = cancelWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-b.done:
		return b.result
	case <-t.C:
	case <-ctx.Done():
	}
	return orchestrate.ResultFor(e.RunningEnvelope(b.info.Load(), int(b.ended.Load())), req.ProtocolVersion())
}

// awaitTimeout is how long an await waits: its timeout_ms, else
// defaultAwait, at most limits.plan_timeout.
func (a *App) awaitTimeout(r *orchestrate.Request) time.Duration {
	d := defaultAwait
	if r.Await != nil && r.Await.TimeoutMS > 0 {
		d = time.Duration(r.Await.TimeoutMS) * time.Millisecond
	}
	return min(d, a.Engine.Limits().PlanTimeout)
}

// recorded answers an await or cancel of a run this process does not hold
// from its execution record: the final envelope of a run that ended, the
// progress of one that runs elsewhere. A run the caller may not see is as
// unknown as one that does not exist, so that ids cannot be probed.
func (a *App) recorded(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, scope store.Scope, id, path string) *mcp.CallToolResult {
	result := func(env *orchestrate.Envelope) *mcp.CallToolResult {
		return orchestrate.ResultFor(env, req.ProtocolVersion())
	}
	refuse := func(code orchestrate.Code, msg string) *mcp.CallToolResult {
		return result(e.Reject(ctx, []*orchestrate.Issue{{Path: path, Code: code, Message: msg}}))
	}
	run, steps, err := a.store.GetIn(ctx, scope, id)
	if err != nil {
		// Not found, another's, or a read that failed: one answer, so that
		// ids cannot be probed; the operator's log has the failure.
		if !errors.Is(err, store.ErrNotFound) {
			a.log.Warn("reading the record of a run to await or cancel", "exec_id", id, "err", err)
		}
		return refuse(orchestrate.CodeUnknownRun, fmt.Sprintf("no run %s of yours can be read: it does not exist, is not yours, or the records could not be read just now; orchestra://executions lists your runs", id))
	}
	switch {
	case len(run.Envelope) > 0:
		var env orchestrate.Envelope
		if err := json.Unmarshal(run.Envelope, &env); err != nil || env.Artifact == nil {
			return refuse(orchestrate.CodeUnknownRun, fmt.Sprintf("the record of run %s holds no envelope that can be read; read %s", id, RecordURI(id)))
		}
		return result(&env)
	case run.Status == store.StatusRunning:
		if path == "cancel.exec_id" {
			return refuse(orchestrate.CodeInvalidRequest, fmt.Sprintf("run %s is not a background run of this server; only background runs can be cancelled", id))
		}
		ended := 0
		for _, st := range steps {
			if st.Kind != "parallel" && st.Kind != orchestrate.TypeForEach && st.Status != orchestrate.StatusRunning && st.Status != orchestrate.StatusPending {
				ended++
			}
		}
		info := &orchestrate.RunInfo{ExecID: run.ExecID, Leaves: run.StepCount, StartedAt: run.StartedAt, Source: run.Tool}
		info.IDs.RequestID, info.IDs.UserID, info.IDs.Tenant = run.RequestID, run.UserID, run.Tenant
		return result(e.RunningEnvelope(info, ended))
	}
	return refuse(orchestrate.CodeNotResumable, fmt.Sprintf("run %s is %s and has no final envelope; read %s, or resume it with {\"resume\": {\"exec_id\": %q}}", id, run.Status, RecordURI(id), id))
}
