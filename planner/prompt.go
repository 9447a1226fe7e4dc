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

const promptHead = `You are orchestra's planner. Turn the goal into a plan of tool calls that orchestra checks and runs in one go: call the __planning__ tool once with
- {"type": "tool_calls", "reasoning": "...", "calls": [{"tool_name": "...", "arguments": {...}}, ...]}, or
- {"type": "direct_response", "content": "..."} when no tool is needed.
Leave out (or set to null) the fields that do not apply. Calls run in order; call i is $i. The plan is checked against the tools' schemas before it runs and problems are sent back to you. A failing call stops the plan. Use only the tools below.`

const promptTemplates = `Templates, as argument values, pass earlier outputs on: "$0.output" (call 0's whole output), "$1.output.items[0].url" (a field; a string that is one template keeps the value's JSON type), "Summary of ${0.output.title}" (inside text; other values are inserted as JSON), "$bindings.name" (a value given with the goal). Use only earlier calls and the output fields listed; a tool without them gives {"text": "..."}. $$ is a literal $.`

// systemPrompt is the planner's system prompt for tools.
func systemPrompt(tools []registry.Tool, maxSteps int) string {
	var b strings.Builder
	b.WriteString(promptHead)
	if maxSteps > 0 {
		fmt.Fprintf(&b, " A plan has at most %d calls.", maxSteps)
	}
	b.WriteString("\n\n")
	b.WriteString(promptTemplates)
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

// maxFieldLines caps the output fields listed per tool.
const maxFieldLines = 40

// outputFields lists the fields of an output schema as paths with their
// types and descriptions, e.g. "sources[].url (string): where it was found".
func outputFields(schema any) []string {
	raw, err := toMap(schema)
	if err != nil {
		return nil
	}
	root, ok := raw.(map[string]any)
	if !ok {
		return nil
	}
	c := &schemaCtx{root: root}
	norm, _ := c.normalize(root, "output", nil).(map[string]any)
	var lines []string
	total := 0
	var walk func(m map[string]any, prefix string, depth int)
	walk = func(m map[string]any, prefix string, depth int) {
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
		for _, name := range slices.Sorted(maps.Keys(props)) {
			ps, _ := props[name].(map[string]any)
			path := prefix + name
			total++
			if len(lines) < maxFieldLines {
				line := path + " (" + typeName(ps) + ")"
				if d := firstSentence(description(ps)); d != "" {
					line += ": " + d
				}
				lines = append(lines, line)
			}
			if depth >= 4 {
				continue
			}
			walk(ps, path+".", depth+1)
			for _, alt := range branches(ps) {
				if items, ok := alt["items"].(map[string]any); ok && len(branchProps(items)) > 0 {
					walk(items, path+"[].", depth+1)
					break
				}
			}
		}
	}
	walk(norm, "", 0)
	if total > len(lines) {
		lines = append(lines, fmt.Sprintf("... and %d more", total-len(lines)))
	}
	return lines
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

func description(m map[string]any) string {
	for _, b := range branches(m) {
		if d, ok := b["description"].(string); ok && d != "" {
			return d
		}
	}
	return ""
}

// firstSentence returns the first line or sentence of s, at most 160 bytes.
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if len(s) > 160 {
		cut := 157
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
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
