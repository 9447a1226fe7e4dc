package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

const promptHead = `You are orchestra's planner. Call __planning__ once with the plan, {"calls": [{"tool_name": "...", "arguments": {...}}], "answer": "..."}, or {"type": "direct_response", "content": "..."} if no tool is needed; omit or null what does not apply. Calls run in order, call i is $i; a failing call stops the plan. Use only the tools below.`

const promptTemplates = `Templates as argument values: "$0.output" (call 0's output), "$1.output.items[0].url" (a field; alone in a string it keeps its type), "Hi ${0.output.name}"; $$ is $. A template may stand for any argument. Use only earlier calls and the output fields listed (strings unless typed; a{b} is a.b, a[]{b} is a[0].b); a tool without them gives {"text": "..."}.`

// systemPrompt is the planner's system prompt for tools.
func systemPrompt(tools []registry.Tool, maxSteps int) string {
	var b strings.Builder
	b.WriteString(promptHead)
	if maxSteps > 0 {
		fmt.Fprintf(&b, " A plan has at most %d calls.", maxSteps)
	}
	b.WriteString("\n\n")
	b.WriteString(promptTemplates)
	b.WriteString("\n\n")
	b.WriteString(promptStructure)
	b.WriteString("\n" + promptAnswer)
	fmt.Fprintf(&b, "\n\nTools (%d):", len(tools))
	if len(tools) == 0 {
		b.WriteString("\n(none: answer with a direct_response)")
	}
	for _, t := range tools {
		b.WriteString(toolBlock(t))
	}
	b.WriteString("\n")
	return b.String()
}

// fieldList renders the fields of an output schema compactly, at most
// limit of them: "id, score: number, items[]{url, tags: array of string},
// meta{lang}". A field is a string unless a type follows its name; a{b}
// is the path a.b and a[]{b} the path a[0].b. An output that is an array
// of objects is "[]{...}". Over the limit, shallow fields are named before
// deep ones. It returns the rendering, how many fields it names and how
// many the schema has.
func fieldList(schema any, limit int) (text string, named, total int) {
	raw, err := toMap(schema)
	if err != nil {
		return "", 0, 0
	}
	root, ok := raw.(map[string]any)
	if !ok {
		return "", 0, 0
	}
	c := &schemaCtx{root: root}
	norm, _ := c.normalize(root, "output", nil).(map[string]any)
	top := &field{}
	switch {
	case len(branchProps(norm)) > 0:
		top.children = fieldsOf(norm, 0)
	case objectItems(norm) != nil:
		top.children = []*field{{name: "", array: true, children: fieldsOf(objectItems(norm), 1)}}
	}
	// Name the fields level by level until the limit.
	level := top.children
	for len(level) > 0 {
		var next []*field
		for _, f := range level {
			if f.name != "" {
				total++
				if named < limit {
					f.shown = true
					named++
				}
			} else {
				f.shown = true // the array output's items
			}
			next = append(next, f.children...)
		}
		level = next
	}
	return renderFields(top.children), named, total
}

// field is one field of an output schema, for fieldList.
type field struct {
	name     string
	typ      string // when it has no named fields
	array    bool   // an array of objects with named fields
	children []*field
	shown    bool
}

// fieldsOf returns the fields of an object schema, sorted by name, four
// levels deep at most.
func fieldsOf(m map[string]any, depth int) []*field {
	props := map[string]any{}
	for _, alt := range branches(m) {
		if p, ok := alt["properties"].(map[string]any); ok {
			for k, v := range p {
				if _, seen := props[k]; !seen {
					props[k] = v
				}
			}
		}
	}
	var out []*field
	for _, name := range slices.Sorted(maps.Keys(props)) {
		ps, _ := props[name].(map[string]any)
		f := &field{name: name, typ: typeName(ps)}
		if depth < 4 {
			if len(branchProps(ps)) > 0 {
				f.children = fieldsOf(ps, depth+1)
			} else if items := objectItems(ps); items != nil {
				f.array, f.children = true, fieldsOf(items, depth+1)
			}
		}
		out = append(out, f)
	}
	return out
}

// renderFields writes the shown fields of fs.
func renderFields(fs []*field) string {
	var parts []string
	for _, f := range fs {
		if !f.shown {
			continue
		}
		part := f.name
		if f.array {
			part += "[]"
		}
		inner := renderFields(f.children)
		switch {
		case inner != "":
			part += "{" + inner + "}"
		case f.array:
			part = f.name + ": array of object"
		case f.typ != "string":
			part += ": " + f.typ
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// objectItems returns the items schema of an array of objects with named
// properties, or nil.
func objectItems(m map[string]any) map[string]any {
	for _, alt := range branches(m) {
		if items, ok := alt["items"].(map[string]any); ok && len(branchProps(items)) > 0 {
			return items
		}
	}
	return nil
}

// branches returns m and the alternatives of its anyOf, oneOf and allOf.
func branches(m map[string]any) []map[string]any {
	if m == nil {
		return nil
	}
	out := []map[string]any{m}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := m[k].([]any); ok {
			for _, a := range alts {
				if am, ok := a.(map[string]any); ok {
					out = append(out, branches(am)...)
				}
			}
		}
	}
	return out
}

func branchProps(m map[string]any) []string {
	var names []string
	for _, b := range branches(m) {
		if p, ok := b["properties"].(map[string]any); ok {
			names = append(names, slices.Collect(maps.Keys(p))...)
		}
	}
	return names
}

// typeName describes the type of a schema: "string", "array of object",
// "string | null", or "any".
func typeName(m map[string]any) string {
	var types []string
	for _, b := range branches(m) {
		switch t := b["type"].(type) {
		case string:
			types = append(types, arrayOf(t, b))
		case []any:
			for _, x := range t {
				if s, ok := x.(string); ok {
					types = append(types, arrayOf(s, b))
				}
			}
		}
	}
	types = slices.Compact(types)
	if len(types) == 0 {
		if _, ok := m["properties"]; ok {
			return "object"
		}
		return "any"
	}
	return strings.Join(types, " | ")
}

func arrayOf(t string, m map[string]any) string {
	if t != "array" {
		return t
	}
	if items, ok := m["items"].(map[string]any); ok {
		if it := typeName(items); it != "any" {
			return "array of " + it
		}
	}
	return "array"
}

// userMessage is the first user message: the goal and the bindings.
func userMessage(goal string, bindings map[string]any) string {
	var b strings.Builder
	b.WriteString("Goal:\n")
	b.WriteString(strings.TrimSpace(goal))
	if len(bindings) > 0 {
		b.WriteString("\n\nBindings (use them as $bindings.<name>):")
		for _, k := range slices.Sorted(maps.Keys(bindings)) {
			data, _ := json.Marshal(bindings[k])
			v := string(data)
			if len(v) > 200 {
				v = v[:200] + "... (truncated)"
			}
			fmt.Fprintf(&b, "\n- %s: %s", k, v)
		}
	}
	return b.String()
}

// repairMessage tells the model what was wrong with its answer.
func repairMessage(attempt, attempts int, issues []*orchestrate.Issue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The plan was not accepted (attempt %d of %d). Problems:", attempt, attempts)
	for _, is := range issues {
		b.WriteString("\n- ")
		b.WriteString(is.Error())
		fmt.Fprintf(&b, " [%s]", is.Code)
		if is.Template != "" {
			fmt.Fprintf(&b, " (template %s)", is.Template)
		}
		if len(is.AvailableFields) > 0 {
			fmt.Fprintf(&b, " (available fields: %s)", strings.Join(is.AvailableFields, ", "))
		}
		if len(is.Suggestions) > 0 {
			fmt.Fprintf(&b, " (did you mean: %s)", strings.Join(is.Suggestions, ", "))
		}
	}
	fmt.Fprintf(&b, "\nFix every problem and call %s again with the complete corrected plan.", ToolName)
	return b.String()
}
