package orchestrate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
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
				// The last event observers see is "final", with the envelope.
				if ev := te.rec.events(); len(ev) == 0 || ev[len(ev)-1] != EventFinal {
					t.Errorf("events %v do not end with %q", ev, EventFinal)
				}
				if env.Artifact.Success != slices.Contains(te.rec.path(), "finished: dispatching_step -> completed") {
					t.Errorf("success %v but path %v", env.Artifact.Success, te.rec.path())
				}
			})
		})
	}
}

// Every step start and end inside a group is observed, as a self-loop.
func TestFSMStepEvents(t *testing.T) {
	te := newTestEngine(t, defaultCatalog(t), Limits{})
	te.Run(t.Context(), mustRequest(t, `{"plan":{"steps":[{"tool":"write","arguments":{"text":"a"}},{"parallel":[{"tool":"write","arguments":{"text":"b"}},{"tool":"write","arguments":{"text":"c"}}]}]}}`))
	count := map[string]int{}
	for _, ev := range te.rec.events() {
		count[ev]++
	}
	// Two top-level starts and two child starts; the children's ends.
	if count["step_started"] != 4 || count["step_finished"] != 2 {
		t.Errorf("step_started %d, step_finished %d; want 4 and 2 (events %v)", count["step_started"], count["step_finished"], te.rec.events())
	}
}
