package planner_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// BenchmarkBuild generates the planning tool for a catalog of 50 tools
// with 10 arguments each (what a catalog change costs).
func BenchmarkBuild(b *testing.B) {
	var tools []registry.Tool
	for i := range 50 {
		var props []string
		for j := range 10 {
			props = append(props, fmt.Sprintf(`"arg_%d":{"type":"integer","description":"argument %d"}`, j, j))
		}
		tools = append(tools, registry.Tool{Name: fmt.Sprintf("tool_%02d", i), Description: "A tool.",
			InputSchema:  schema(b, `{"type":"object","properties":{`+strings.Join(props, ",")+`}}`),
			OutputSchema: schema(b, `{"type":"object","properties":{"id":{"type":"string"},"items":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"}}}}}}`)})
	}
	b.ReportAllocs()
	for b.Loop() {
		planner.Build(1, tools, planner.BuildOptions{})
	}
}

// BenchmarkPlan measures planning without the model: the request, the
// decoding and the validation of a two-step plan.
func BenchmarkPlan(b *testing.B) {
	responses := make([]llm.Response, 0, 1)
	responses = append(responses, planning(validPlan))
	f := newFixture(b, nil, fixtureOpts{})
	req := &orchestrate.Request{Prompt: "Write a blog post about AI trends"}
	b.ReportAllocs()
	for b.Loop() {
		p := f.planner.WithModel(llm.NewScripted(responses))
		if _, err := p.Plan(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
