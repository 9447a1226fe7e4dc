package orchestrate

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Checkpoint is what a run needs to go on: its request, the records of its
// steps that ended, and, while it is paused, the calls it waits for.
type Checkpoint struct {
	ExecID string
	// Status is "paused", "interrupted", "failed" or "cancelled" for a run
	// that can be resumed; anything else cannot be.
	Status string
	// Request holds the plan, bindings, client tools and the limits it
	// asked for.
	Request *Request
	// Steps are the records of the run's tool steps that ended, by id.
	Steps map[string]*StepRecord
	// Pending are the calls a paused run waits for.
	Pending []*PendingCall
	// Loops are the paused tool loops of its steps, by step id.
	Loops map[string]*LoopPause
	// ExpiresAt is when a paused run stops waiting.
	ExpiresAt time.Time
	// Claims counts how often the run was taken up again; Claim takes it
	// only when the count has not moved since Load.
	Claims int
}

// Checkpoint statuses.
const (
	CheckpointPaused      = "paused"
	CheckpointInterrupted = "interrupted"
	CheckpointFailed      = "failed"
	CheckpointCancelled   = "cancelled"
)

// ErrClaimed is returned by PauseStore.Claim when another resume took the
// run since it was loaded.
var ErrClaimed = errors.New("the run was resumed by another request")

// ErrNoCheckpoint is returned by PauseStore.Load for a run that does not
// exist, or that the caller may not see.
var ErrNoCheckpoint = errors.New("no such run")

// PauseStore keeps what paused runs and runs that may be resumed need.
// Its methods are called with the context of the request concerned (a
// store may read the caller's identity from it).
type PauseStore interface {
	// Keep records the request of a run whose plan is ready, so that the
	// run can be resumed if it is interrupted or fails. It may queue the
	// write.
	Keep(ctx context.Context, execID string, req *Request)
	// Pause records that the run waits for pending, until expires, with
	// the paused tool loops of its steps. It returns once that is durable:
	// the client is answered after it.
	Pause(ctx context.Context, execID string, req *Request, pending []*PendingCall, loops map[string]*LoopPause, expires time.Time) error
	// Load returns the checkpoint of a run, or ErrNoCheckpoint.
	Load(ctx context.Context, execID string) (*Checkpoint, error)
	// Claim takes the run for one resume: it fails with ErrClaimed unless
	// its claims still number cp.Claims. A claimed run is running again.
	// event ("resumed" or "expired") and the steps whose results came are
	// for the run's history.
	Claim(ctx context.Context, cp *Checkpoint, event string, steps []string) error
}

// memoryPauses keeps paused runs in memory: the engine's default, for
// engines without a store. Only paused runs can be resumed with it.
type memoryPauses struct {
	mu     sync.Mutex
	runs   map[string]*Checkpoint
	claims int // claims so far, of every run
}

func (m *memoryPauses) Keep(context.Context, string, *Request) {}

func (m *memoryPauses) Pause(_ context.Context, execID string, req *Request, pending []*PendingCall, loops map[string]*LoopPause, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs = map[string]*Checkpoint{}
	}
	// Claims count every claim of the store: a checkpoint read before a
	// claim never matches the run paused again after it.
	claims := m.claims
	now := time.Now()
	for id, cp := range m.runs { // forget what can no longer be resumed
		if cp.Status != CheckpointPaused || now.After(cp.ExpiresAt) {
			delete(m.runs, id)
		}
	}
	m.runs[execID] = &Checkpoint{ExecID: execID, Status: CheckpointPaused, Request: req, Pending: pending, Loops: loops, ExpiresAt: expires, Claims: claims}
	return nil
}

// stepsOf is set by the engine: memoryPauses reads the steps of a paused
// run from the run that paused.
func (m *memoryPauses) keepSteps(execID string, steps map[string]*StepRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cp := m.runs[execID]; cp != nil {
		cp.Steps = steps
	}
}

func (m *memoryPauses) Load(_ context.Context, execID string) (*Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.runs[execID]
	if !ok {
		return nil, ErrNoCheckpoint
	}
	c := *cp
	return &c, nil
}

func (m *memoryPauses) Claim(_ context.Context, cp *Checkpoint, _ string, _ []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.runs[cp.ExecID]
	if !ok || cur.Claims != cp.Claims || cur.Status != cp.Status {
		return ErrClaimed
	}
	m.claims++
	cur.Claims = m.claims
	cur.Status = "running"
	return nil
}
