package orchestrate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry"
)

// TestFatalLimitStopsValidation: once a plan is over max_steps, its steps
// are not checked: 14,000 unknown tool names against a 10,000-tool catalog
// used to cost a "did you mean" search each, seconds of CPU for an answer
// that only says the plan is too large.
func TestFatalLimitStopsValidation(t *testing.T) {
	tools := make([]registry.Tool, 0, 10000)
	for i := range 10000 {
		tools = append(tools, registry.Tool{Name: fmt.Sprintf("tool_%05d", i), Description: "x", Source: "test",
			Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) { return nil, nil }})
	}
	var b strings.Builder
	b.WriteString(`{"plan":{"steps":[`)
	for i := range 14000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"tool":"tool_x%05d"}`, i)
	}
	b.WriteString(`]}}`)
	e := NewEngine(Options{Tools: registry.NewCatalog(tools...)})
	v := e.Validate(mustRequest(t, b.String()))
	if len(v.Errors) != 1 || v.Errors[0].Code != CodeTooManySteps {
		codes := map[Code]int{}
		for _, is := range v.Errors {
			codes[is.Code]++
		}
		t.Errorf("errors %v; want only too_many_steps", codes)
	}
}
