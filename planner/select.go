package planner

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/rank"
	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// Tool selection: a catalog of more than SelectAbove tools offers a goal
// only the SelectTop tools that rank best for it (BM25 over their names,
// descriptions and argument names) with their schemas; the others are
// named in the prompt, so that the model can still ask for one.
const (
	// SelectAbove is the catalog size from which tools are selected.
	SelectAbove = 24
	// SelectTop is how many tools a goal is offered.
	SelectTop = 12
)

// ToolDocument is what a tool is ranked by: its name (twice: it is the
// densest description), its description and its argument names.
func ToolDocument(t registry.Tool) string {
	var b strings.Builder
	b.WriteString(t.Name + " " + t.Name + " " + t.Description)
	if t.InputSchema != nil {
		for _, k := range slices.Sorted(maps.Keys(t.InputSchema.Properties)) {
			b.WriteString(" " + k)
		}
	}
	return b.String()
}

// Select returns the SelectTop tools of tools that rank best for goal, in
// rank order, and the names of the rest. A catalog of SelectAbove tools or
// fewer is returned whole.
func Select(tools []registry.Tool, goal string) (picked []registry.Tool, rest []string) {
	if len(tools) <= SelectAbove {
		return tools, nil
	}
	docs := make([]string, len(tools))
	for i, t := range tools {
		docs[i] = ToolDocument(t)
	}
	top := rank.New(docs).Top(goal, SelectTop)
	in := map[int]bool{}
	for _, i := range top {
		picked = append(picked, tools[i])
		in[i] = true
	}
	// A workflow that ranks among them comes first: it does in one call
	// what the tools it composes (its description names them, so they
	// rank for the same words) would do in several.
	notWorkflow := func(t registry.Tool) int {
		if strings.HasPrefix(t.Name, orchestrate.WorkflowToolPrefix) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(picked, func(a, b registry.Tool) int { return cmp.Compare(notWorkflow(a), notWorkflow(b)) })
	for i, t := range tools {
		if !in[i] {
			rest = append(rest, t.Name)
		}
	}
	return picked, rest
}

// othersNote is the prompt's line naming the tools not offered.
func othersNote(rest []string) string {
	if len(rest) == 0 {
		return ""
	}
	return fmt.Sprintf("\nOther tools (%d), not offered for this goal: %s\n", len(rest), strings.Join(rest, ", "))
}

// toolFor returns the planning tool for goal: the catalog's, or, for a
// catalog of more than SelectAbove tools, one made of the tools selected
// for the goal, whose prompt names the others.
func (p *Planner) toolFor(goal string) *Tool {
	t := p.Tool()
	if p.opts.Catalog == nil || len(t.Tools) <= SelectAbove {
		return t
	}
	all := registry.Filter(p.opts.Catalog.List(), func(x registry.Tool) bool { return slices.Contains(t.Tools, x.Name) })
	picked, rest := Select(all, goal)
	st := Build(t.Version, picked, BuildOptions{Forbidden: p.opts.Forbidden, MaxSteps: p.opts.Engine.Limits().MaxSteps})
	st.Prompt += othersNote(rest)
	return st
}

// The planning tool's answer and return fields, and what the prompt says
// of them.
const (
	answerNote   = "tool_calls: the reply, with ${i.output.field} where results go."
	returnNote   = "a value to hand back, e.g. \"$2.output\"."
	promptAnswer = `"answer" (${i.output.field} where results go) is rendered after the run as the reply, saving a model call; omit it only if the results must be read first.`
)

// Lean tool blocks: what the prompt says of each tool it offers.
const (
	// maxToolDescription caps a tool's description in the prompt.
	maxToolDescription = 400
	// maxBlockFields caps the output fields a block names.
	maxBlockFields = 24
)

// toolBlock describes one tool in the prompt in a few lines: its name,
// its description, and its output fields with their types (the planning
// schema carries its arguments).
func toolBlock(t registry.Tool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n## %s\n", t.Name)
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = "(no description)"
	}
	b.WriteString(textcut.Truncate(desc, maxToolDescription))
	if t.OutputSchema == nil {
		b.WriteString("\nOutput: not described; {\"text\": \"...\"} when the tool returns only text.")
		return b.String()
	}
	fields, named, total := fieldList(t.OutputSchema, maxBlockFields)
	if fields == "" {
		b.WriteString("\nOutput: $N.output (no named fields).")
		return b.String()
	}
	b.WriteString("\nOutput fields: " + fields)
	if total > named {
		fmt.Fprintf(&b, ", +%d more", total-named)
	}
	return b.String()
}
