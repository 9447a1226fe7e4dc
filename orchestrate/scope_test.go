package orchestrate

import (
	"testing"
	"time"
)

// TestLimitsLower: a tenant's or a request's limits only ever lower the
// engine's.
func TestLimitsLower(t *testing.T) {
	base := DefaultLimits()
	got := base.Lower(Limits{MaxSteps: 3, MaxParallel: base.MaxParallel + 10, PlanTimeout: time.Second, StepTimeout: time.Hour, MaxIterations: 2})
	if got.MaxSteps != 3 || got.MaxParallel != base.MaxParallel || got.PlanTimeout != time.Second || got.StepTimeout != base.StepTimeout || got.MaxIterations != 2 {
		t.Errorf("Lower = %+v", got)
	}
	if base.Lower(Limits{}) != base {
		t.Error("zero limits changed the engine's")
	}
}
