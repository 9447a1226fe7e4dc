package fsm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	lfsm "github.com/looplab/fsm"
)

// States of an orchestration.
const (
	StatePlanInit        = "plan_init"
	StatePlannerActive   = "planner_active"
	StatePlanValidated   = "plan_validated"
	StateDispatchingStep = "dispatching_step"
	StateAwaitingResults = "awaiting_results"
	StateMergingResults  = "merging_results"
	// StateAwaitingClient: the run waits for its caller to run client
	// tools and send their results back (a resume).
	StateAwaitingClient = "awaiting_client"
	StateCompleted      = "completed"
	StateFailed         = "failed"
)

// Events of an orchestration.
const (
	// EventStartPlan starts the planner (the prompt path).
	EventStartPlan = "start_plan"
	// EventPlannerFinished: the planner produced a plan that validated.
	EventPlannerFinished = "planner_finished"
	// EventValidated: a given plan passed plan-time validation.
	EventValidated = "validated"
	// EventValidationFailed: the plan (given or planned) is invalid, or the
	// planner failed; nothing runs.
	EventValidationFailed = "validation_failed"
	// EventDispatch: execution starts.
	EventDispatch = "dispatch"
	// EventStepsDispatched: steps are in flight and the loop waits for them.
	EventStepsDispatched = "steps_dispatched"
	// EventStepSucceeded: a tool step ended without halting the plan.
	EventStepSucceeded = "step_succeeded"
	// EventStepFailed: a step failed and halts the plan.
	EventStepFailed = "step_failed"
	// EventStepFailedContinue: a step failed with on_error "continue".
	EventStepFailedContinue = "step_failed_continue"
	// EventParallelComplete: every child of a parallel group ended.
	EventParallelComplete = "parallel_complete"
	// EventMerged: a group's children were merged; execution goes on.
	EventMerged = "merged"
	// EventStepStarted: a tool step or group started (no change of state).
	EventStepStarted = "step_started"
	// EventStepFinished: a step inside a group ended (no change of state).
	EventStepFinished = "step_finished"
	// EventFinished: nothing is left to run.
	EventFinished = "finished"
	// EventTimeout: the plan's deadline passed.
	EventTimeout = "timeout"
	// EventPanic: a tool or the engine panicked.
	EventPanic = "panic"
	// EventCancelled: the caller cancelled the orchestration.
	EventCancelled = "cancelled"
	// EventClientCall: a top-level step (or a group's child) waits for the
	// client to run its tool; the other steps go on.
	EventClientCall = "client_call"
	// EventPause: nothing more can run before the client's results come:
	// the run waits for them.
	EventPause = "pause"
	// EventResume: the client's results came; execution goes on.
	EventResume = "resume"
	// EventLimitExceeded: the run reached a limit it found only while
	// running (limits.max_iterations when a loop's array resolved,
	// limits.max_tool_calls); nothing new starts.
	EventLimitExceeded = "limit_exceeded"
	// EventFallback: the planner failed, and a tool loop (the reactive
	// fallback) makes the run's steps in the plan's place.
	EventFallback = "fallback"
	// EventFallbackFailed: the fallback's loop ended without an answer.
	EventFallbackFailed = "fallback_failed"
)

// running is every state in which the plan can still time out, panic or be
// cancelled.
var running = []string{
	StatePlanInit, StatePlannerActive, StatePlanValidated, StateDispatchingStep,
	StateAwaitingResults, StateMergingResults, StateAwaitingClient,
}

// Transitions returns the transition table of an orchestration, built
// anew at each call: the events that move the machine, then the self-loops
// of step_started and step_finished.
func Transitions() []lfsm.EventDesc {
	t := []lfsm.EventDesc{
		{Name: EventStartPlan, Src: []string{StatePlanInit}, Dst: StatePlannerActive},
		{Name: EventPlannerFinished, Src: []string{StatePlannerActive}, Dst: StatePlanValidated},
		{Name: EventValidated, Src: []string{StatePlanInit}, Dst: StatePlanValidated},
		{Name: EventValidationFailed, Src: []string{StatePlanInit, StatePlannerActive, StateAwaitingClient}, Dst: StateFailed},
		{Name: EventDispatch, Src: []string{StatePlanValidated}, Dst: StateDispatchingStep},
		{Name: EventStepsDispatched, Src: []string{StateDispatchingStep}, Dst: StateAwaitingResults},
		{Name: EventStepSucceeded, Src: []string{StateAwaitingResults}, Dst: StateDispatchingStep},
		{Name: EventStepFailedContinue, Src: []string{StateAwaitingResults, StateMergingResults}, Dst: StateDispatchingStep},
		{Name: EventStepFailed, Src: []string{StateAwaitingResults, StateMergingResults}, Dst: StateFailed},
		{Name: EventParallelComplete, Src: []string{StateAwaitingResults}, Dst: StateMergingResults},
		{Name: EventMerged, Src: []string{StateMergingResults}, Dst: StateDispatchingStep},
		{Name: EventFinished, Src: []string{StateDispatchingStep}, Dst: StateCompleted},
		{Name: EventClientCall, Src: []string{StateAwaitingResults, StateMergingResults}, Dst: StateDispatchingStep},
		{Name: EventPause, Src: []string{StateDispatchingStep}, Dst: StateAwaitingClient},
		{Name: EventResume, Src: []string{StateAwaitingClient}, Dst: StateDispatchingStep},
		{Name: EventTimeout, Src: running, Dst: StateFailed},
		{Name: EventPanic, Src: running, Dst: StateFailed},
		{Name: EventCancelled, Src: running, Dst: StateFailed},
		{Name: EventLimitExceeded, Src: []string{StateDispatchingStep, StateAwaitingResults, StateMergingResults}, Dst: StateFailed},
		{Name: EventFallback, Src: []string{StatePlannerActive}, Dst: StateDispatchingStep},
		{Name: EventFallbackFailed, Src: []string{StateDispatchingStep}, Dst: StateFailed},
	}
	// step_started and step_finished change no state: one self-loop per state.
	for _, st := range stepping {
		t = append(t,
			lfsm.EventDesc{Name: EventStepStarted, Src: []string{st}, Dst: st},
			lfsm.EventDesc{Name: EventStepFinished, Src: []string{st}, Dst: st})
	}
	return t
}

// stepping is every state in which a step can start or end: the steps of a
// halted plan that were already running still end in failed.
var stepping = []string{StateDispatchingStep, StateAwaitingResults, StateMergingResults, StateFailed}

// selfLoop holds the events that change no state.
var selfLoop = map[string]bool{EventStepStarted: true, EventStepFinished: true}

// Transition is one move of the machine.
type Transition struct {
	Event string
	From  string
	To    string
	At    time.Time
	// Detail is what the firing code attached: the step id, an error.
	Detail any
}

// Observer sees every transition, in order, on the goroutine that fired it.
type Observer func(Transition)

// Machine is the state machine of one orchestration. It is safe for
// concurrent use, though the executor fires events from one loop.
type Machine struct {
	mu        sync.Mutex
	f         *lfsm.FSM // nil once released
	final     string    // the state when released
	observers []Observer
	history   []Transition
	now       func() time.Time
}

// machines keeps looplab machines between orchestrations. Building one
// expands the whole transition table into maps, which costs more than a
// short run's every event; a released machine is reset to StatePlanInit,
// and without callbacks or metadata it is then as good as new.
var machines = sync.Pool{New: func() any { return lfsm.NewFSM(StatePlanInit, Transitions(), nil) }}

// New returns a machine in StatePlanInit with the given observers.
func New(observers ...Observer) *Machine {
	m := &Machine{observers: observers, now: time.Now}
	m.f = machines.Get().(*lfsm.FSM)
	return m
}

// NewPaused returns a machine in StateAwaitingClient with the given
// observers: the machine of a paused run taken up again, whose first event
// is EventResume (or what ends it: a timeout when the pause expired).
func NewPaused(observers ...Observer) *Machine {
	m := New(observers...)
	m.f.SetState(StateAwaitingClient)
	return m
}

// Release ends the machine's use of its looplab machine, which the next
// orchestration may take over. The machine keeps answering Current, Done
// and History with the state it ended in; Fire fails from then on.
func (m *Machine) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return
	}
	f := m.f
	m.final, m.f = f.Current(), nil
	f.SetState(StatePlanInit)
	machines.Put(f)
}

// current returns the state; m.mu is held.
func (m *Machine) current() string {
	if m.f == nil {
		return m.final
	}
	return m.f.Current()
}

// Fire fires event with an optional detail for observers. Firing an event
// that does not apply to the current state is an error; so the caller's
// logic and the transition table can never silently disagree.
//
// Fire ignores ctx's cancellation: a cancelled plan must still be able to
// move to failed.
func (m *Machine) Fire(ctx context.Context, event string, detail any) error {
	m.mu.Lock()
	if m.f == nil {
		m.mu.Unlock()
		return fmt.Errorf("state machine: event %s fired after the orchestration ended in %s", event, m.final)
	}
	from := m.f.Current()
	if selfLoop[event] {
		// A self-loop changes no state and the machine has no callbacks:
		// the table alone decides whether it applies, which spares the
		// allocations of a full looplab event on every step.
		if !m.f.Can(event) {
			m.mu.Unlock()
			return fmt.Errorf("state machine: %w", lfsm.InvalidEventError{Event: event, State: from})
		}
	} else {
		if ctx.Done() != nil {
			ctx = context.WithoutCancel(ctx)
		}
		if err := m.f.Event(ctx, event); err != nil {
			if _, ok := err.(lfsm.NoTransitionError); !ok {
				m.mu.Unlock()
				return fmt.Errorf("state machine: %w", err)
			}
		}
	}
	t := Transition{Event: event, From: from, To: m.f.Current(), At: m.now(), Detail: detail}
	m.history = append(m.history, t)
	observers := m.observers
	m.mu.Unlock()
	for _, o := range observers {
		o(t)
	}
	return nil
}

// Grow reserves room in the history for n more transitions: a run that
// knows its number of steps spares the history's regrowth.
func (m *Machine) Grow(n int) {
	m.mu.Lock()
	m.history = slices.Grow(m.history, n)
	m.mu.Unlock()
}

// Current returns the current state.
func (m *Machine) Current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current()
}

// Done reports whether the machine reached a final state. A paused run's
// machine (StateAwaitingClient) is not done.
func (m *Machine) Done() bool {
	s := m.Current()
	return s == StateCompleted || s == StateFailed
}

// Can reports whether event applies to the current state.
func (m *Machine) Can(event string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.f != nil && m.f.Can(event)
}

// History returns every transition so far.
func (m *Machine) History() []Transition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Transition(nil), m.history...)
}

// Path returns the states visited so far, starting with StatePlanInit.
func (m *Machine) Path() []string {
	h := m.History()
	path := []string{StatePlanInit}
	for _, t := range h {
		path = append(path, t.To)
	}
	return path
}
