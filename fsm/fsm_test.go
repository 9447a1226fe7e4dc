package fsm

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var allStates = []string{
	StatePlanInit, StatePlannerActive, StatePlanValidated, StateDispatchingStep,
	StateAwaitingResults, StateMergingResults, StateAwaitingClient, StateCompleted, StateFailed,
}

var allEvents = []string{
	EventStartPlan, EventPlannerFinished, EventValidated, EventValidationFailed, EventDispatch,
	EventStepsDispatched, EventStepSucceeded, EventStepFailed, EventStepFailedContinue,
	EventParallelComplete, EventMerged, EventStepStarted, EventStepFinished, EventFinished,
	EventTimeout, EventPanic, EventCancelled, EventLimitExceeded, EventClientCall, EventPause, EventResume,
	EventFallback, EventFallbackFailed,
}

// wantTable is the transition table of the design, written out: for each
// event, the states it applies in and where it leads. A pair missing here
// must be refused.
var wantTable = map[string]map[string]string{
	EventStartPlan:        {StatePlanInit: StatePlannerActive},
	EventPlannerFinished:  {StatePlannerActive: StatePlanValidated},
	EventValidated:        {StatePlanInit: StatePlanValidated},
	EventValidationFailed: {StatePlanInit: StateFailed, StatePlannerActive: StateFailed, StateAwaitingClient: StateFailed},
	EventDispatch:         {StatePlanValidated: StateDispatchingStep},
	EventStepsDispatched:  {StateDispatchingStep: StateAwaitingResults},
	EventStepSucceeded:    {StateAwaitingResults: StateDispatchingStep},
	EventStepFailed:       {StateAwaitingResults: StateFailed, StateMergingResults: StateFailed},
	EventStepFailedContinue: {
		StateAwaitingResults: StateDispatchingStep, StateMergingResults: StateDispatchingStep,
	},
	EventParallelComplete: {StateAwaitingResults: StateMergingResults},
	EventMerged:           {StateMergingResults: StateDispatchingStep},
	EventFinished:         {StateDispatchingStep: StateCompleted},
	EventClientCall:       {StateAwaitingResults: StateDispatchingStep, StateMergingResults: StateDispatchingStep},
	EventPause:            {StateDispatchingStep: StateAwaitingClient},
	EventResume:           {StateAwaitingClient: StateDispatchingStep},
	EventStepStarted: {
		StateDispatchingStep: StateDispatchingStep, StateAwaitingResults: StateAwaitingResults,
		StateMergingResults: StateMergingResults, StateFailed: StateFailed,
	},
	EventStepFinished: {
		StateDispatchingStep: StateDispatchingStep, StateAwaitingResults: StateAwaitingResults,
		StateMergingResults: StateMergingResults, StateFailed: StateFailed,
	},
	EventTimeout:   whileRunning(StateFailed),
	EventPanic:     whileRunning(StateFailed),
	EventCancelled: whileRunning(StateFailed),
	EventLimitExceeded: {
		StateDispatchingStep: StateFailed, StateAwaitingResults: StateFailed, StateMergingResults: StateFailed,
	},
	EventFallback:       {StatePlannerActive: StateDispatchingStep},
	EventFallbackFailed: {StateDispatchingStep: StateFailed},
}

// whileRunning maps every state before a final one to dst.
func whileRunning(dst string) map[string]string {
	m := map[string]string{}
	for _, s := range allStates {
		if s != StateCompleted && s != StateFailed {
			m[s] = dst
		}
	}
	return m
}

// TestTransitionTable compares the declared table with the design's.
func TestTransitionTable(t *testing.T) {
	got := map[string]map[string]string{}
	for _, d := range Transitions() {
		if got[d.Name] == nil {
			got[d.Name] = map[string]string{}
		}
		for _, src := range d.Src {
			if prev, dup := got[d.Name][src]; dup {
				t.Errorf("event %s from %s is declared twice (to %s and %s)", d.Name, src, prev, d.Dst)
			}
			got[d.Name][src] = d.Dst
			if !slices.Contains(allStates, src) || !slices.Contains(allStates, d.Dst) {
				t.Errorf("event %s uses an unknown state: %s -> %s", d.Name, src, d.Dst)
			}
		}
		if !slices.Contains(allEvents, d.Name) {
			t.Errorf("unknown event %s in the table", d.Name)
		}
	}
	if diff := cmp.Diff(wantTable, got); diff != "" {
		t.Errorf("transition table (-want +got):\n%s", diff)
	}
	// Nothing leaves a final state.
	for ev, m := range got {
		for src, dst := range m {
			if (src == StateCompleted || src == StateFailed) && dst != src {
				t.Errorf("event %s leaves the final state %s for %s", ev, src, dst)
			}
		}
	}
}

// reach returns a machine in state.
func reach(t *testing.T, state string, obs ...Observer) *Machine {
	t.Helper()
	paths := map[string][]string{
		StatePlanInit:        nil,
		StatePlannerActive:   {EventStartPlan},
		StatePlanValidated:   {EventValidated},
		StateDispatchingStep: {EventValidated, EventDispatch},
		StateAwaitingResults: {EventValidated, EventDispatch, EventStepsDispatched},
		StateMergingResults:  {EventValidated, EventDispatch, EventStepsDispatched, EventParallelComplete},
		StateAwaitingClient:  {EventValidated, EventDispatch, EventPause},
		StateCompleted:       {EventValidated, EventDispatch, EventFinished},
		StateFailed:          {EventValidationFailed},
	}
	m := New(obs...)
	for _, ev := range paths[state] {
		if err := m.Fire(context.Background(), ev, nil); err != nil {
			t.Fatalf("reaching %s: %v", state, err)
		}
	}
	if m.Current() != state {
		t.Fatalf("reached %s, want %s", m.Current(), state)
	}
	return m
}

// TestMachineFollowsTable fires every event in every state of a real
// machine: the looplab wiring does what the table says and refuses the rest.
func TestMachineFollowsTable(t *testing.T) {
	for _, src := range allStates {
		for _, ev := range allEvents {
			m := reach(t, src)
			before := len(m.History())
			dst, allowed := wantTable[ev][src]
			if got := m.Can(ev); got != allowed && dst != src {
				t.Errorf("Can(%s) in %s = %v, want %v", ev, src, got, allowed)
			}
			err := m.Fire(context.Background(), ev, "detail")
			switch {
			case allowed && err != nil:
				t.Errorf("%s in %s: %v, want a move to %s", ev, src, err, dst)
			case allowed && m.Current() != dst:
				t.Errorf("%s in %s led to %s, want %s", ev, src, m.Current(), dst)
			case allowed:
				h := m.History()
				if len(h) != before+1 {
					t.Errorf("%s in %s: history grew by %d, want 1", ev, src, len(h)-before)
				} else if last := h[len(h)-1]; last.Event != ev || last.From != src || last.To != dst || last.Detail != "detail" {
					t.Errorf("%s in %s recorded %+v", ev, src, last)
				}
			case err == nil:
				t.Errorf("%s in %s was accepted (now %s); the table does not allow it", ev, src, m.Current())
			case m.Current() != src || len(m.History()) != before:
				t.Errorf("a refused %s in %s changed the machine: now %s", ev, src, m.Current())
			}
		}
	}
}

func TestDone(t *testing.T) {
	for _, s := range allStates {
		want := s == StateCompleted || s == StateFailed
		if got := reach(t, s).Done(); got != want {
			t.Errorf("Done() in %s = %v, want %v", s, got, want)
		}
	}
}

// Observers see every transition in order, self-loops included, and Path
// lists the states visited.
func TestObserversAndPath(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	m := New(func(tr Transition) {
		mu.Lock()
		seen = append(seen, tr.Event+":"+tr.From+">"+tr.To)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a cancelled context must not keep the machine from moving
	for _, ev := range []string{EventValidated, EventDispatch, EventStepStarted, EventStepsDispatched, EventParallelComplete, EventMerged, EventFinished} {
		if err := m.Fire(ctx, ev, nil); err != nil {
			t.Fatalf("%s: %v", ev, err)
		}
	}
	want := []string{
		"validated:plan_init>plan_validated",
		"dispatch:plan_validated>dispatching_step",
		"step_started:dispatching_step>dispatching_step",
		"steps_dispatched:dispatching_step>awaiting_results",
		"parallel_complete:awaiting_results>merging_results",
		"merged:merging_results>dispatching_step",
		"finished:dispatching_step>completed",
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	wantPath := []string{StatePlanInit, StatePlanValidated, StateDispatchingStep, StateDispatchingStep, StateAwaitingResults, StateMergingResults, StateDispatchingStep, StateCompleted}
	if diff := cmp.Diff(wantPath, m.Path()); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
}

// Concurrent firing of self-loops (steps of a group ending together) is
// safe and loses nothing.
func TestConcurrentFire(t *testing.T) {
	m := reach(t, StateAwaitingResults)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := m.Fire(context.Background(), EventStepFinished, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(m.History()); n != 3+50 {
		t.Errorf("history has %d transitions, want 53", n)
	}
}

func TestReleasedMachineKeepsItsStateAndRefusesEvents(t *testing.T) {
	ctx := context.Background()
	m := New()
	for _, ev := range []string{EventValidated, EventDispatch, EventFinished} {
		if err := m.Fire(ctx, ev, nil); err != nil {
			t.Fatalf("Fire(%s): %v", ev, err)
		}
	}
	m.Release()
	m.Release() // twice is harmless
	if got := m.Current(); got != StateCompleted {
		t.Errorf("Current after Release = %q, want %q", got, StateCompleted)
	}
	if !m.Done() {
		t.Error("Done after Release = false")
	}
	if err := m.Fire(ctx, EventStepStarted, nil); err == nil {
		t.Error("Fire after Release succeeded; it must fail")
	}
	if m.Can(EventStepStarted) {
		t.Error("Can after Release = true")
	}
	if n := len(m.History()); n != 3 {
		t.Errorf("history has %d transitions after Release, want 3", n)
	}
	// The next machine starts afresh, whatever machine it reuses.
	for range 4 {
		n := New()
		if got := n.Current(); got != StatePlanInit {
			t.Fatalf("a new machine is in %q, want %q", got, StatePlanInit)
		}
		if err := n.Fire(ctx, EventValidated, nil); err != nil {
			t.Fatalf("a new machine refuses %s: %v", EventValidated, err)
		}
		n.Release()
	}
}

// A paused run's machine, taken up again, starts in awaiting_client and
// goes on with resume, or fails when the pause expired.
func TestNewPaused(t *testing.T) {
	ctx := context.Background()
	m := NewPaused()
	if got := m.Current(); got != StateAwaitingClient {
		t.Fatalf("NewPaused is in %q, want %q", got, StateAwaitingClient)
	}
	if m.Done() {
		t.Error("a paused machine is done")
	}
	for _, ev := range []string{EventResume, EventStepsDispatched, EventStepSucceeded, EventFinished} {
		if err := m.Fire(ctx, ev, nil); err != nil {
			t.Fatalf("Fire(%s): %v", ev, err)
		}
	}
	m.Release()
	expired := NewPaused()
	if err := expired.Fire(ctx, EventTimeout, nil); err != nil || expired.Current() != StateFailed {
		t.Errorf("timeout while paused: %v, now %s", err, expired.Current())
	}
	expired.Release()
	if n := New(); n.Current() != StatePlanInit {
		t.Errorf("a machine after a paused one starts in %q", n.Current())
	}
}
