package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Idempotent calls. A call of agent_orchestrate with an idempotency key
// (the input's idempotency_key, else its _meta's
// toolcontext.MetaIdempotencyKey) claims the key for its caller (owner and
// tenant) in the store, for limits.idempotency_ttl: a repeat gets the first
// call's result and runs nothing; while the first still runs, the repeat
// waits for it, within its own timeout, and then answers with its exec id
// and the status running. The key with another input (its canonical hash)
// is refused with idempotency_conflict. The claim is an insert that the
// store's primary key lets only one call make, on any replica.
//
// A call refused before it ran (its input invalid: validation errors) or
// that gave no final result (an input request of multi round-trip
// sampling) gives its key up: the caller may correct the input and send it
// again with the same key. A run with a key outlives its connection (it
// ends with its timeout, or on shutdown): the caller that lost it retries
// and gets its result.

const (
	// maxIdempotentResultBytes caps the result kept for a key's repeats; a
	// larger one is kept as a pointer to its execution record.
	maxIdempotentResultBytes = 8 << 20
	// idempotencyTimeout bounds the store's writes of a key.
	idempotencyTimeout = 10 * time.Second
	// idempotencyPoll is the first and idempotencyPollMax the longest wait
	// between two looks at a key whose first call runs on another replica.
	idempotencyPoll    = 20 * time.Millisecond
	idempotencyPollMax = time.Second
)

// idempotentCall is a call with an idempotency key.
type idempotentCall struct {
	key     store.IdempotencyKey
	hash    string        // the canonical hash of its input, without the key
	timeout time.Duration // the input's timeout_ms; 0 means the plan timeout
	won     atomic.Bool   // this call holds the key: its run is the one
	started atomic.Bool   // its run's exec id is recorded
}

// finished wakes the callers of this process that wait for a key's first
// call: each finish closes the current channel and makes the next.
type finished struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next finish.
func (f *finished) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch
}

// wake closes the channel of those waiting.
func (f *finished) wake() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// idempotencyOf returns the idempotency key of req and its input's hash;
// nil when it has none. The input passes the request's decoding gate
// first; an input that does not is left to the handler, which refuses it.
// A malformed key in _meta is an issue.
func (a *App) idempotencyOf(ctx context.Context, req *mcp.CallToolRequest) (*idempotentCall, *orchestrate.Issue) {
	if req.Params == nil {
		return nil, nil
	}
	args := req.Params.Arguments
	metaKey, inMeta := req.Params.GetMeta()[toolcontext.MetaIdempotencyKey]
	if !inMeta && !bytes.Contains(args, []byte(`"idempotency_key"`)) {
		return nil, nil
	}
	var input map[string]any
	if len(args) > 0 {
		if err := a.Config.Server.RequestGate().Unmarshal(args, &input); err != nil {
			return nil, nil
		}
	}
	key, _ := input["idempotency_key"].(string)
	if key == "" && inMeta {
		s, ok := metaKey.(string)
		if !ok || !toolcontext.ValidID(s, toolcontext.MaxIdempotencyKeyBytes) {
			return nil, &orchestrate.Issue{Path: "_meta." + toolcontext.MetaIdempotencyKey, Code: orchestrate.CodeInvalidValue,
				Message: fmt.Sprintf("the idempotency key must be 1 to %d printable ASCII characters without spaces (a UUID, for example)", toolcontext.MaxIdempotencyKeyBytes)}
		}
		key = s
	}
	if !toolcontext.ValidID(key, toolcontext.MaxIdempotencyKeyBytes) {
		return nil, nil // the handler's decoder says what is wrong with it
	}
	delete(input, "idempotency_key")      // decoded here: no one else holds it
	canonical, err := json.Marshal(input) // maps marshal with sorted keys
	if err != nil {
		return nil, nil
	}
	sum := sha256.Sum256(canonical)
	ids, _ := toolcontext.IDsFrom(ctx)
	c := &idempotentCall{key: store.IdempotencyKey{Owner: ids.Owner, Tenant: ids.Tenant, Key: key}, hash: hex.EncodeToString(sum[:])}
	if ms, ok := input["timeout_ms"].(float64); ok && ms > 0 {
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	return c, nil
}

// hooks records the exec id of the call's run once it starts, for the
// repeats that find it still running.
func (a *App) idempotencyHooks(c *idempotentCall) *orchestrate.Hooks {
	return &orchestrate.Hooks{RunStarted: func(i orchestrate.RunStartedInfo) {
		if !c.won.Load() || i.Run.ParentExecID != "" || !c.started.CompareAndSwap(false, true) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), idempotencyTimeout)
		defer cancel()
		if err := a.store.StartIdempotencyKey(ctx, c.key, c.hash, i.Run.ExecID); err != nil {
			a.log.Warn("recording the run of an idempotency key", "exec_id", i.Run.ExecID, "err", err)
		}
	}}
}

// idempotent answers call c: it claims c's key and runs handle, or answers
// with the result of the call that holds it, waiting for it while it runs.
func (a *App) idempotent(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, c *idempotentCall, handle mcp.ToolHandler) (*mcp.CallToolResult, error) {
	timeout := c.timeout
	if plan := e.Limits().PlanTimeout; timeout <= 0 || timeout > plan {
		timeout = plan
	}
	// A holder that left no result for longer than any run may take (its
	// process died) no longer holds the key.
	stale := e.Limits().PlanTimeout + a.Config.Server.ShutdownGrace + time.Minute
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cl, err := a.store.ClaimIdempotencyKey(ctx, c.key, c.hash, a.Config.Limits.IdempotencyTTL, stale)
		switch {
		case err != nil:
			a.log.WarnContext(ctx, "claiming an idempotency key", "err", err)
			return a.refuse(ctx, e, req, orchestrate.CodeIdempotencyUnavailable, "the idempotency key could not be checked, so nothing ran: "+err.Error()+"; retry in a moment with the same key"), nil
		case cl.Won:
			return a.runIdempotent(ctx, req, c, handle)
		case cl.Hash != c.hash:
			return a.refuse(ctx, e, req, orchestrate.CodeIdempotencyConflict, fmt.Sprintf("this idempotency key was used for a call with a different input (at %s); nothing ran. Send the same input to get that call's result, or use a new key for a new call", cl.ClaimedAt.Format(time.RFC3339))), nil
		case cl.Result != nil:
			return a.replay(req, cl)
		}
		a.log.DebugContext(ctx, "waiting for the first call of an idempotency key", "exec_id", cl.ExecID)
		cl, held, err := a.awaitIdempotent(wctx, c)
		switch {
		case err != nil:
			return a.refuse(ctx, e, req, orchestrate.CodeIdempotencyUnavailable, "the idempotency key could not be checked, so nothing ran: "+err.Error()+"; retry in a moment with the same key"), nil
		case held && cl.Result != nil && cl.Hash == c.hash:
			return a.replay(req, cl)
		case held && wctx.Err() != nil:
			return a.inProgress(ctx, req, cl), nil
		case wctx.Err() != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		}
		// The key was given up (the first call was refused before it ran,
		// or its holder died): claim it again.
	}
}

// awaitIdempotent waits until the call holding c's key has a result, no
// longer holds it, or ctx ends, and returns the key's state then.
func (a *App) awaitIdempotent(ctx context.Context, c *idempotentCall) (store.Claim, bool, error) {
	poll := idempotencyPoll
	for {
		woken := a.idemDone.wait()
		cl, held, err := a.store.IdempotencyClaim(context.WithoutCancel(ctx), c.key)
		if err != nil || !held || cl.Result != nil || ctx.Err() != nil {
			return cl, held, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-woken:
		case <-t.C:
		}
		t.Stop()
		poll = min(2*poll, idempotencyPollMax)
	}
}

// runIdempotent runs the call that holds c's key and keeps its result for
// the repeats, or gives the key up when the call did not run.
func (a *App) runIdempotent(ctx context.Context, req *mcp.CallToolRequest, c *idempotentCall, handle mcp.ToolHandler) (*mcp.CallToolResult, error) {
	c.won.Store(true)
	defer a.idemDone.wake()
	// The run outlives its connection: a caller that lost it retries with
	// the key and gets this run's result. Shutdown still cancels it.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(a.drain, cancel)
	defer stop()
	res, err := handle(rctx, req)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), idempotencyTimeout)
	defer scancel()
	outcome := outcomeOf(res)
	if err != nil || res == nil || outcome == nil || len(outcome.Artifact.ValidationErrors) > 0 {
		if rerr := a.store.ReleaseIdempotencyKey(sctx, c.key, c.hash); rerr != nil {
			a.log.WarnContext(ctx, "giving up an idempotency key", "err", rerr)
		}
		return res, err
	}
	data, merr := json.Marshal(res)
	if merr == nil && len(data) > maxIdempotentResultBytes {
		stand := &mcp.CallToolResult{}
		stand.SetError(fmt.Errorf("the first call with this idempotency key ran (exec id %s), and its result of %d bytes is more than the %d kept for its repeats: read it at %s",
			outcome.Metadata.ExecID, len(data), maxIdempotentResultBytes, RecordURI(outcome.Metadata.ExecID)))
		data, merr = json.Marshal(stand)
	}
	if merr == nil {
		merr = a.store.FinishIdempotencyKey(sctx, c.key, c.hash, outcome.Metadata.ExecID, data)
	}
	if merr != nil {
		a.log.WarnContext(ctx, "keeping the result of an idempotency key", "err", merr)
	}
	return res, err
}

// outcome is what an idempotent call's result says of its run.
type outcome struct {
	Artifact struct {
		ValidationErrors []json.RawMessage `json:"validation_errors"`
	} `json:"artifact"`
	Metadata struct {
		ExecID string `json:"exec_id"`
	} `json:"_metadata"`
}

// outcomeOf reads the envelope of res; nil when res carries none (an input
// request of multi round-trip sampling).
func outcomeOf(res *mcp.CallToolResult) *outcome {
	if res == nil || res.StructuredContent == nil {
		return nil
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil
	}
	var o outcome
	if err := json.Unmarshal(data, &o); err != nil {
		return nil
	}
	return &o
}

// replay answers a repeat with the result kept for the key, read through
// the decoding gate (another replica wrote it).
func (a *App) replay(req *mcp.CallToolRequest, cl store.Claim) (*mcp.CallToolResult, error) {
	gate := a.Config.Server.RequestGate()
	gate.Bytes = maxIdempotentResultBytes + 1<<10
	var res mcp.CallToolResult
	if err := gate.Unmarshal(cl.Result, &res); err != nil {
		out := &mcp.CallToolResult{}
		out.SetError(fmt.Errorf("the first call with this idempotency key ran (exec id %s), and its kept result cannot be read (%v): read it at %s", cl.ExecID, err, RecordURI(cl.ExecID)))
		return out, nil
	}
	return &res, nil
}

// inProgress answers a repeat whose wait ended before the first call did:
// the first call's exec id, and the status running.
func (a *App) inProgress(ctx context.Context, req *mcp.CallToolRequest, cl store.Claim) *mcp.CallToolResult {
	ids, _ := toolcontext.IDsFrom(ctx)
	env := &orchestrate.Envelope{
		ArtifactID: cl.ExecID,
		Artifact: &orchestrate.Artifact{Status: orchestrate.StatusRunning, Errors: []*orchestrate.Error{{Code: orchestrate.CodeIdempotencyInProgress,
			Message: fmt.Sprintf("the first call with this idempotency key (exec id %s, since %s) is still running; call again with the same key to get its result", cl.ExecID, cl.ClaimedAt.Format(time.RFC3339))}}},
		Metadata: orchestrate.Metadata{ContextID: ids.ContextID, RequestID: ids.RequestID, TraceID: ids.TraceID, UserID: ids.UserID, ToolName: orchestrate.ToolName,
			ExecutedAt: time.Now().UTC().Format(time.RFC3339Nano), Depth: toolcontext.Depth(ctx), ExecID: cl.ExecID},
	}
	if cl.ExecID != "" {
		env.Metadata.Record = RecordURI(cl.ExecID)
	}
	return a.resultFor(req, env)
}

// refuse answers a call with an idempotency key that cannot run.
func (a *App) refuse(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, code orchestrate.Code, msg string) *mcp.CallToolResult {
	return a.resultFor(req, e.Reject(ctx, []*orchestrate.Issue{{Path: "idempotency_key", Code: code, Message: msg}}))
}
