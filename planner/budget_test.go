package planner_test

import (
	"encoding/json"
	"testing"

	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/nestful"
)

// planningTokenBudget caps what the planning request's fixed part (the
// system prompt and the __planning__ tool) costs on average over the 300
// NESTFUL tasks, each offered its own tools, in tokens of 4 bytes of JSON
// as the model section of the bench harness counts them. It was 1,412
// before the lean prompt and schema.
const planningTokenBudget = 960

func TestPlanningTokensNESTFUL(t *testing.T) {
	ds, err := nestful.Load(nestful.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]registry.Tool{}
	for _, x := range ds.Tools {
		byName[x.Name] = x
	}
	tok := func(v any) int {
		data, _ := json.Marshal(v)
		return (len(data) + 3) / 4
	}
	var prompt, schema int
	for _, s := range ds.Samples {
		var tools []registry.Tool
		for _, n := range s.ToolNames {
			if n != nestful.ResultTool {
				tools = append(tools, byName[n])
			}
		}
		pt := planner.Build(1, tools, planner.BuildOptions{MaxSteps: 64})
		prompt += tok(pt.Prompt)
		schema += tok(pt.Def())
	}
	n := len(ds.Samples)
	got := float64(prompt+schema) / float64(n)
	t.Logf("%d tasks: %.0f tokens per planning request (prompt %.0f, __planning__ %.0f)", n, got, float64(prompt)/float64(n), float64(schema)/float64(n))
	if got > planningTokenBudget {
		t.Errorf("the planning request costs %.0f tokens on average; the budget is %d", got, planningTokenBudget)
	}
}
