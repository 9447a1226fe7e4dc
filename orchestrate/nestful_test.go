package orchestrate

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/nestful"
)

// TestNESTFUL runs orchestra's validator and executor on the 300
// human-checked nested tool-call sequences of NESTFUL: every gold sequence
// validates and runs with every reference resolved; every mutated one fails
// validation with the code its mutation calls for.
func TestNESTFUL(t *testing.T) {
	ds, err := nestful.Load(nestful.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Skipped) > 0 {
		t.Errorf("%d samples or tools could not be converted: %v", len(ds.Skipped), ds.Skipped)
	}
	cat := registry.NewCatalog(ds.Tools...)
	tools := map[string]registry.Tool{}
	for _, tool := range ds.Tools {
		tools[tool.Name] = tool
	}
	lim := DefaultLimits()
	lim.MaxSteps = 100
	e := NewEngine(Options{Tools: cat, Limits: lim})
	ctx := context.Background()

	var valid, ran, refs int
	mutations := map[string][2]int{} // kind -> {caught, total}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range ds.Samples {
		data, err := json.Marshal(map[string]any{"plan": s.Plan})
		if err != nil {
			t.Fatal(err)
		}
		req, issues := DecodeRequest(data)
		if len(issues) > 0 {
			t.Errorf("%s #%d: decoding: %v", s.Source, s.Index, issues[0])
			continue
		}
		v := e.Validate(req)
		if !v.OK() {
			t.Errorf("%s #%d (%q): the gold sequence does not validate: %s [%s]", s.Source, s.Index, s.Input, v.Errors[0].Error(), v.Errors[0].Code)
			continue
		}
		valid++
		env := e.Run(ctx, req)
		if !env.Artifact.Success {
			t.Errorf("%s #%d: the gold sequence failed to run: %v", s.Source, s.Index, env.Artifact.Errors)
			continue
		}
		ran++
		for _, st := range req.Plan.Leaves() {
			forEachRef(st.Arguments, func(*Ref) { refs++ })
		}

		for _, m := range nestful.Mutate(s, tools, rng) {
			c := mutations[m.Kind]
			c[1]++
			mutations[m.Kind] = c
			data, _ := json.Marshal(map[string]any{"plan": m.Plan})
			req, issues := DecodeRequest(data)
			if len(issues) > 0 {
				t.Errorf("%s #%d %s: decoding: %v", s.Source, s.Index, m.Kind, issues[0])
				continue
			}
			v := e.Validate(req)
			codes := []string{}
			for _, is := range v.Errors {
				codes = append(codes, string(is.Code))
			}
			if !slices.Contains(codes, m.WantCode) {
				mp, _ := json.Marshal(m.Plan["steps"].([]any)[m.Step])
				t.Errorf("%s #%d %s: want %s among the errors, got %v; step %d: %s", s.Source, s.Index, m.Kind, m.WantCode, codes, m.Step, mp)
				continue
			}
			c[0]++
			mutations[m.Kind] = c
		}
	}
	t.Logf("NESTFUL: %d samples (%v), %d tools; %d gold sequences validate, %d run with every reference resolved (%d template references)",
		len(ds.Samples), ds.Stats.Samples, len(ds.Tools), valid, ran, refs)
	for _, kind := range []string{"missing_field", "forward_ref", "wrong_type"} {
		t.Logf("NESTFUL mutations %-13s caught %d of %d", kind, mutations[kind][0], mutations[kind][1])
	}
	if len(ds.Samples) != 300 || valid != 300 || ran != 300 {
		t.Errorf("want all 300 sequences to validate and run; %d of %d validated, %d ran", valid, len(ds.Samples), ran)
	}
}
