package planner_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/nestful"
)

// TestSelectionRecallNESTFUL ranks the whole NESTFUL catalog for every
// NESTFUL query and measures how many of the tools the gold plan calls
// are among the tools offered (recall@k, averaged over the tasks).
func TestSelectionRecallNESTFUL(t *testing.T) {
	ds, err := nestful.Load(nestful.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	tools := registry.Filter(ds.Tools, func(x registry.Tool) bool { return x.Name != nestful.ResultTool })
	recall := map[int]float64{}
	for _, s := range ds.Samples {
		picked, _ := planner.Select(tools, s.Input)
		var gold []string
		for _, n := range s.ToolNames {
			if n != nestful.ResultTool {
				gold = append(gold, n)
			}
		}
		for _, k := range []int{1, 3, 5, planner.SelectTop} {
			found := 0
			for _, g := range gold {
				if slices.ContainsFunc(picked[:min(k, len(picked))], func(x registry.Tool) bool { return x.Name == g }) {
					found++
				}
			}
			recall[k] += float64(found) / float64(len(gold))
		}
	}
	n := float64(len(ds.Samples))
	var report []string
	for _, k := range []int{1, 3, 5, planner.SelectTop} {
		report = append(report, fmt.Sprintf("recall@%d %.3f", k, recall[k]/n))
	}
	t.Logf("%d tasks, %d tools: %s", len(ds.Samples), len(tools), strings.Join(report, ", "))
	if got := recall[planner.SelectTop] / n; got < 0.8 {
		t.Errorf("recall@%d is %.3f; want at least 0.8", planner.SelectTop, got)
	}
}

// A catalog over planner.SelectAbove tools offers a goal the
// planner.SelectTop best tools, in the prompt and the planning schema,
// and names the others.
func TestLargeCatalogOffersSelectedTools(t *testing.T) {
	c := &calls{}
	tools := blogTools(t, c)
	for i := range planner.SelectAbove {
		tools = append(tools, registry.Tool{Name: fmt.Sprintf("noise_%02d", i), Description: "Convert temperatures between units.",
			InputSchema: schema(t, `{"type":"object","properties":{"celsius":{"type":"number"}}}`)})
	}
	m := llm.NewScripted([]llm.Response{planning(validPlan)})
	cat := registry.NewCatalog(tools...)
	p := planner.New(planner.Options{Catalog: cat, Engine: orchestrate.NewEngine(orchestrate.Options{Tools: cat}), Model: m})
	if _, err := p.Plan(t.Context(), &orchestrate.Request{Prompt: "Research AI trends and write a blog post from the research artifact"}); err != nil {
		t.Fatal(err)
	}
	req := m.Requests()[0]
	for _, name := range []string{"research_blog", "create_blog_post"} {
		if !strings.Contains(req.System, "## "+name) {
			t.Errorf("the prompt does not describe %s", name)
		}
	}
	offered := strings.Count(req.System, "\n## ")
	if offered != planner.SelectTop {
		t.Errorf("the prompt describes %d tools; want %d", offered, planner.SelectTop)
	}
	if !strings.Contains(req.System, "Other tools (15)") {
		t.Errorf("the prompt does not name the other tools:\n%s", req.System[strings.LastIndex(req.System, "\n## "):])
	}
	// A tool may appear more than once in the schema (as a call and as a
	// call of a parallel group): count the distinct names.
	offeredNames := map[string]bool{}
	for _, name := range regexp.MustCompile(`noise_\d\d`).FindAllString(fmt.Sprint(req.Tools[0].Parameters), -1) {
		offeredNames[name] = true
	}
	if len(offeredNames) > planner.SelectTop {
		t.Errorf("the planning schema offers %d noise tools; want at most %d", len(offeredNames), planner.SelectTop)
	}
}
