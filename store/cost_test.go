package store

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestRunCost keeps what a run's model calls cost, read from its envelope
// (the planner's, its agents', an agent run's model turns), on every
// database; a run any of whose model calls is unpriced, or that called no
// model, has no cost (NULL, not 0).
func TestRunCost(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		for _, c := range []struct {
			id, env string
			want    *float64
		}{
			{"priced", `{"artifact":{"planner":{"model_calls":1,"input_tokens":1000,"output_tokens":200,"cost_usd":0.0045},
				"agents":{"model_calls":2,"tokens_in":700,"tokens_out":110,"cost_usd":0.000171}}}`, ptr(0.004671)},
			{"agent run", `{"artifact":{"steps":[{"type":"model","output":{"tokens_in":300,"tokens_out":50,"cost_usd":0.000075}},
				{"type":"tool","output":{"cost_usd":5}},{"type":"model","output":{"tokens_in":400,"tokens_out":60,"cost_usd":0.000096}}]}}`, ptr(0.000171)},
			{"agents unpriced", `{"artifact":{"planner":{"model_calls":1,"input_tokens":10,"output_tokens":2,"cost_usd":0.1},
				"agents":{"model_calls":1,"tokens_in":5,"tokens_out":1}}}`, nil},
			{"a turn unpriced", `{"artifact":{"steps":[{"type":"model","output":{"tokens_in":3,"tokens_out":1,"cost_usd":0.5}},
				{"type":"model","output":{"tokens_in":3,"tokens_out":1}}]}}`, nil},
			{"no model", `{"artifact":{"status":"success","steps":[{"type":"tool","output":1}]}}`, nil},
		} {
			if err := s.StartRun(ctx, Run{ExecID: c.id, Tool: "cli", Plan: json.RawMessage(`{"steps":[]}`)}); err != nil {
				t.Fatal(err)
			}
			if err := s.FinishRun(ctx, c.id, StatusSuccess, json.RawMessage(c.env), time.Time{}, 0); err != nil {
				t.Fatal(err)
			}
			run, _, err := s.Get(ctx, c.id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == nil && run.CostUSD != nil:
				t.Errorf("%s: cost %v, want none", c.id, *run.CostUSD)
			case c.want != nil && (run.CostUSD == nil || math.Abs(*run.CostUSD-*c.want) > 1e-12):
				t.Errorf("%s: cost %v, want %v", c.id, run.CostUSD, *c.want)
			}
		}
		runs, _, err := s.List(ctx, ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		costed := map[string]bool{"priced": true, "agent run": true}
		for _, r := range runs {
			if costed[r.ExecID] != (r.CostUSD != nil) {
				t.Errorf("List: %s costs %v", r.ExecID, r.CostUSD)
			}
		}
	})
}

func ptr(f float64) *float64 { return &f }
