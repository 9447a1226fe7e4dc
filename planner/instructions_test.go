package planner_test

import (
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

// TestInstructionLayers: the planning request and the answer (RESPOND)
// hold the operator's instructions, then the tenant's, then the
// request's, the request's cut to orchestrate.MaxInstructionBytes.
func TestInstructionLayers(t *testing.T) {
	m := llm.NewScripted([]llm.Response{planning(validPlan), text("Done.")})
	f := newFixture(t, m, fixtureOpts{})
	long := "REQUEST-RULE " + strings.Repeat("y", 2*orchestrate.MaxInstructionBytes)
	p := planner.New(planner.Options{Catalog: f.cat, Engine: f.engine, Model: m,
		Instructions:  orchestrate.Instructions{Operator: "OPERATOR-RULE", Tenant: "TENANT-RULE", Caller: "ignored: the request's own come from it"},
		ContextTokens: 10 * orchestrate.MaxInstructionBytes})
	env, err := p.Ask(t.Context(), &orchestrate.Request{Prompt: "Write a blog post about AI", Context: &orchestrate.CallerContext{Instructions: long}})
	if err != nil {
		t.Fatal(err)
	}
	if env.Artifact.Response != "Done." {
		t.Fatalf("response %q, errors %v", env.Artifact.Response, env.Artifact.Errors)
	}
	reqs := m.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want planning and RESPOND", len(reqs))
	}
	for i, name := range []string{"planning", "RESPOND"} {
		msg := userText(reqs[i])
		o, tn, r := strings.Index(msg, "OPERATOR-RULE"), strings.Index(msg, "TENANT-RULE"), strings.Index(msg, "REQUEST-RULE")
		if o < 0 || tn < o || r < tn {
			t.Errorf("%s: the layers are at %d, %d, %d; want the operator's, the tenant's, then the request's:\n%.600s", name, o, tn, r, msg)
		}
		if strings.Contains(msg, "ignored") {
			t.Errorf("%s: the planner's own Caller layer was used", name)
		}
		if n := strings.Count(msg, "y"); n > orchestrate.MaxInstructionBytes+50 {
			t.Errorf("%s: the request's layer was not cut: %d bytes of it", name, n)
		}
	}
}
