package orchestrate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/orchestra-mcp/orchestra/fsm"
)

// The paths runs take through the state machine, collected by an observer.
func TestFSMPaths(t *testing.T) {
	for _, tc := range []struct {
		name    string
		request string
		planner func(context.Context) (*Plan, *PlannerInfo, []*Issue, error)
		want    []string
	}{{
		name:    "planner failure goes straight to failed",
		request: `{"prompt":"anything"}`,
		planner: func(context.Context) (*Plan, *PlannerInfo, []*Issue, error) {
			return nil, nil, nil, errors.New("no model")
		},
		want: []string{"start_plan: plan_init -> planner_active", "validation_failed: planner_active -> failed"},
	}, {
		name:    "planner plan invalid",
		request: `{"prompt":"anything"}`,
		planner: func(context.Context) (*Plan, *PlannerInfo, []*Issue, error) {
			req, _ := DecodeRequest([]byte(`{"plan":{"steps":[{"tool":"nope"}]}}`))
			return req.Plan, nil, nil, nil
		},
		want: []string{"start_plan: plan_init -> planner_active", "validation_failed: planner_active -> failed"},
	}, {
		name:    "parallel group merges before completing",
		request: `{"plan":{"steps":[{"parallel":[{"tool":"write","arguments":{"text":"a"}},{"tool":"write","arguments":{"text":"b"}}]}]}}`,
		want: []string{
			"validated: plan_init -> plan_validated", "dispatch: plan_validated -> dispatching_step",
			"steps_dispatched: dispatching_step -> awaiting_results", "parallel_complete: awaiting_results -> merging_results",
			"merged: merging_results -> dispatching_step", "finished: dispatching_step -> completed",
		},
	}, {
		name:    "plan timeout fires timeout",
		request: `{"timeout_ms":50,"plan":{"steps":[{"tool":"hang"}]}}`,
		want: []string{
			"validated: plan_init -> plan_validated", "dispatch: plan_validated -> dispatching_step",
			"steps_dispatched: dispatching_step -> awaiting_results", "timeout: awaiting_results -> failed",
		},
	}, {
		name:    "panic fires panic",
		request: `{"plan":{"steps":[{"tool":"boom"}]}}`,
		want: []string{
			"validated: plan_init -> plan_validated", "dispatch: plan_validated -> dispatching_step",
			"steps_dispatched: dispatching_step -> awaiting_results", "panic: awaiting_results -> failed",
		},
	}, {
		name:    "a limit found while running fires limit_exceeded",
		request: `{"plan":{"steps":[{"id":"e","tool":"echo","arguments":{"items":[` + strings.Repeat(`1,`, 64) + `1]}},{"for_each":"$e.output.items","do":{"tool":"echo"}}]}}`,
		want: []string{
			"validated: plan_init -> plan_validated", "dispatch: plan_validated -> dispatching_step",
			"steps_dispatched: dispatching_step -> awaiting_results", "step_succeeded: awaiting_results -> dispatching_step",
			"steps_dispatched: dispatching_step -> awaiting_results", "limit_exceeded: awaiting_results -> failed",
		},
	}, {
		name:    "invalid plan",
		request: `{"plan":{"steps":[{"tool":"nope"}]}}`,
		want:    []string{"validation_failed: plan_init -> failed"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				te := newTestEngine(t, defaultCatalog(t), Limits{})
				var env *Envelope
				if tc.planner != nil {
					env = te.RunPrompt(t.Context(), mustRequest(t, tc.request), tc.planner)
				} else {
					env = te.Run(t.Context(), mustRequest(t, tc.request))
				}
				te.logs.checkFSM(t)
				if diff := cmp.Diff(tc.want, te.rec.path()); diff != "" {
					t.Errorf("path (-want +got):\n%s", diff)
				}
				// The first hook is RunStarted, the last RunFinished.
				if h := te.rec.calls(); len(h) < 2 || h[0] != "run_started" || h[len(h)-1] != "run_finished" {
					t.Errorf("hooks %v do not begin with run_started and end with run_finished", h)
				}
				if env.Artifact.Success != slices.Contains(te.rec.path(), "finished: dispatching_step -> completed") {
					t.Errorf("success %v but path %v", env.Artifact.Success, te.rec.path())
				}
			})
		})
	}
}

// Every step and group is seen to start and to end, at the top level and
// inside groups, each exactly once, a group around its children.
func TestStepHooks(t *testing.T) {
	te := newTestEngine(t, defaultCatalog(t), Limits{})
	te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"tool":"write","arguments":{"text":"a"}},{"parallel":[{"tool":"write","arguments":{"text":"b"}},{"tool":"write","arguments":{"text":"c"}}]}]}}`))
	got := te.rec.calls()
	if len(got) != 11 {
		t.Fatalf("hooks %v, want 11", got)
	}
	// The group's children run at once: their order is free, but each
	// starts before it ends.
	children := slices.Clone(got[5:9])
	for _, c := range []string{"plan.steps[1].parallel[0]", "plan.steps[1].parallel[1]"} {
		if slices.Index(children, "step_started "+c) > slices.Index(children, "step_ended "+c+" success") {
			t.Errorf("%s ended before it started: %v", c, children)
		}
	}
	slices.Sort(children)
	got = slices.Concat(got[:5], children, got[9:])
	want := []string{
		"run_started", "plan_ready",
		"step_started plan.steps[0]", "step_ended plan.steps[0] success",
		"step_started plan.steps[1]",
		"step_ended plan.steps[1].parallel[0] success", "step_ended plan.steps[1].parallel[1] success",
		"step_started plan.steps[1].parallel[0]", "step_started plan.steps[1].parallel[1]",
		"step_ended plan.steps[1] success", "run_finished",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}
}

// An event the state machine refuses is an error of the run that its
// hooks see, not only a log line: the test engines fail on it.
func TestRefusedEventIsAnError(t *testing.T) {
	var got error
	e := NewEngine(Options{Hooks: &Hooks{RunFinished: func(i RunFinishedInfo) { got = i.Err }}})
	r := e.newRun(t.Context(), &Request{})
	r.fire(fsm.EventMerged) // plan_init has no merged
	env := r.reject([]*Issue{{Code: CodeInvalidRequest, Message: "not a request"}})
	if got == nil || !strings.Contains(got.Error(), "merged") || !strings.Contains(got.Error(), fsm.StatePlanInit) {
		t.Errorf("RunFinishedInfo.Err = %v, want the refused event", got)
	}
	if env.Artifact.Status != StatusFailed {
		t.Errorf("status %s", env.Artifact.Status)
	}
}

// A hook that panics takes neither the run nor the process down: the run
// ends as it would have, and the panic is its internal error.
func TestPanickingHook(t *testing.T) {
	var got error
	e := NewEngine(Options{Tools: defaultCatalog(t), Hooks: ComposeHooks(
		&Hooks{StepEnded: func(StepEndedInfo) { panic("observer bug") }},
		&Hooks{RunFinished: func(i RunFinishedInfo) { got = i.Err }},
	)})
	env := e.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"parallel":[{"tool":"write","arguments":{"text":"a"}}]}]}}`))
	if !env.Artifact.Success {
		t.Errorf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
	}
	if got == nil || strings.Count(got.Error(), "observer bug") != 2 {
		t.Errorf("RunFinishedInfo.Err = %v, want the panics of the child's and the group's StepEnded", got)
	}
}

// ComposeHooks calls each consumer's hook in order and skips nil ones.
func TestComposeHooks(t *testing.T) {
	var got []string
	a := &Hooks{PlanReady: func(PlanReadyInfo) { got = append(got, "a") }}
	b := &Hooks{PlanReady: func(PlanReadyInfo) { got = append(got, "b") }, RunStarted: func(RunStartedInfo) { got = append(got, "b started") }}
	h := ComposeHooks(nil, a, nil, b)
	h.RunStarted(RunStartedInfo{})
	h.PlanReady(PlanReadyInfo{})
	if want := []string{"b started", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if h.StepEnded != nil || ComposeHooks() != nil || ComposeHooks(nil) != nil {
		t.Error("nothing to call must stay nil")
	}
	if a.PlanReady == nil || b.RunStarted == nil || h == a || h == b {
		t.Error("ComposeHooks changed what it was given")
	}
}
