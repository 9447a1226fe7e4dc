package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// ToolName is the name of the one tool the planner offers the model.
const ToolName = "__planning__"

// toolDescription is the description of the planning tool.
const toolDescription = `Submit the plan, as the system prompt says.`

// Catalog is where the planner reads the tools from; [*registry.Catalog]
// is one.
type Catalog interface {
	List() []registry.Tool
	Version() uint64
}

// Tool is the planning tool generated from one version of a catalog: its
// schemas and the system prompt that goes with them.
type Tool struct {
	// Version is the catalog version it was generated from.
	Version uint64
	// Tools are the names of the tools a plan may call, sorted.
	Tools []string
	// Strict is the schema for providers' strict structured-output modes:
	// every object closed, every property required (optional ones
	// nullable), no keyword strict modes reject. It is nil when the
	// catalog's schemas cannot be made strict; StrictProblems says why.
	Strict map[string]any
	// StrictProblems lists what kept the catalog from a strict schema.
	StrictProblems []string
	// Loose is the non-strict schema: the tools' own argument schemas,
	// made self-contained.
	Loose map[string]any
	// Prompt is the system prompt: how to plan, the template syntax, and
	// each tool's description and output fields.
	Prompt string

	inputs map[string]map[string]any // normalized input schemas by tool
	descs  map[string]string         // descriptions by tool
}

// Def returns the planning tool as offered to a model: strict when the
// catalog allows it.
func (t *Tool) Def() llm.ToolDef {
	if t.Strict != nil {
		return llm.ToolDef{Name: ToolName, Description: toolDescription, Parameters: t.Strict, Strict: true}
	}
	return t.LooseDef()
}

// LooseDef returns the planning tool with its non-strict schema.
func (t *Tool) LooseDef() llm.ToolDef {
	return llm.ToolDef{Name: ToolName, Description: toolDescription, Parameters: t.Loose}
}

// BuildOptions configure [Build].
type BuildOptions struct {
	// Forbidden reports tools a plan may not call; they are not offered.
	// agent_orchestrate is never offered.
	Forbidden func(name string) bool
	// MaxSteps is the step limit the prompt states; 0 states none.
	MaxSteps int
}

// Build generates the planning tool for tools.
func Build(version uint64, tools []registry.Tool, opts BuildOptions) *Tool {
	tools = registry.Filter(tools, func(t registry.Tool) bool {
		return t.Name != orchestrate.ToolName && t.Name != ToolName && (opts.Forbidden == nil || !opts.Forbidden(t.Name))
	})
	slices.SortFunc(tools, func(a, b registry.Tool) int { return strings.Compare(a.Name, b.Name) })
	pt := &Tool{Version: version, Tools: []string{}, inputs: map[string]map[string]any{}, descs: map[string]string{}}
	var strictCalls, looseCalls, strictGroupCalls []any
	strictOK := true
	for _, t := range tools {
		pt.Tools = append(pt.Tools, t.Name)
		pt.descs[t.Name] = t.Description
		raw, err := toMap(t.InputSchema)
		if err != nil {
			raw = nil
		}
		root, _ := raw.(map[string]any)
		if root == nil {
			root = map[string]any{"type": "object"}
		}
		nc := &schemaCtx{root: root}
		norm, _ := nc.normalize(root, "arguments", nil).(map[string]any)
		if norm["type"] == nil {
			norm["type"] = "object"
		}
		pt.inputs[t.Name] = norm
		looseCalls = append(looseCalls, looseCall(t.Name, lean(norm, true)))

		sc := &schemaCtx{root: root}
		sc.problems = append(sc.problems, nc.problems...)
		strictArgs := sc.strict(lean(norm, false), "arguments", true)
		if len(sc.problems) > 0 {
			strictOK = false
			for _, p := range sc.problems {
				pt.StrictProblems = append(pt.StrictProblems, t.Name+" "+p)
			}
			continue
		}
		strictCalls = append(strictCalls, withStepFields(callSchema(t.Name, widen(strictArgs, true))))
		strictGroupCalls = append(strictGroupCalls, groupCall(t.Name, widen(strictArgs, true)))
	}
	flow := len(tools) > 0 && returnsArrays(tools)
	pt.Loose = withFlow(planningSchema(looseCalls, nil, false), flow, false)
	if strictOK {
		s := withFlow(planningSchema(strictCalls, strictGroupCalls, true), flow, true)
		if problems := strictSize(s); len(problems) > 0 {
			pt.StrictProblems = append(pt.StrictProblems, problems...)
		} else {
			pt.Strict = s
		}
	}
	pt.Prompt = systemPrompt(tools, opts.MaxSteps)
	if flow {
		pt.Prompt = strings.Replace(pt.Prompt, promptTemplates, promptTemplates+"\n\n"+flowNote, 1)
	}
	return pt
}

// callSchema is the schema of one call of the tool name.
func callSchema(name string, args any) map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"tool_name": map[string]any{"type": "string", "enum": []any{name}},
			"arguments": args,
		},
		"required":             []any{"tool_name", "arguments"},
		"additionalProperties": false,
	}
}

// looseCall is the non-strict schema of one call of the tool name: its
// name and arguments, as the tool declares them. What every call may
// carry besides (result_key, on_error, retry) and that a template may
// stand for any argument are taught once in the prompt instead of
// repeated per tool and per argument: a non-strict schema guides the
// model and the plan is validated anyway.
func looseCall(name string, args any) map[string]any {
	return map[string]any{
		"properties": map[string]any{
			"tool_name": map[string]any{"enum": []any{name}},
			"arguments": args,
		},
		"required": []any{"tool_name", "arguments"},
	}
}

// planningSchema is the schema of the planning tool's arguments.
func planningSchema(calls, groupCalls []any, strict bool) map[string]any {
	kinds := []any{"direct_response"}
	if len(calls) > 0 {
		kinds = append(kinds, "tool_calls")
	}
	// A loose schema leaves to the prompt what the prompt says already.
	str := func(desc string) map[string]any {
		if strict {
			return map[string]any{"type": []any{"string", "null"}, "description": desc}
		}
		return map[string]any{"type": "string"}
	}
	props := map[string]any{
		"type":      map[string]any{"type": "string", "enum": kinds},
		"content":   str("direct_response: the answer." + nullNote(strict)),
		"reasoning": str("tool_calls: why, briefly." + nullNote(strict)),
	}
	if !strict {
		props["type"] = map[string]any{"enum": kinds}
	}
	required := []any{"type", "content", "reasoning"}
	if len(calls) > 0 {
		items := withStructure(props, calls, groupCalls, strict)
		arr := map[string]any{"type": "array", "items": items}
		if strict {
			arr["type"] = []any{"array", "null"}
			arr["description"] = "tool_calls: the calls, in order; call i is $i." + nullNote(strict)
		}
		props["calls"] = arr
		required = append(required, "calls", "schedule")
		props["answer"] = str(answerNote + nullNote(strict))
		required = append(required, "answer")
		if !strict {
			props["return"] = map[string]any{"description": returnNote}
		}
	}
	out := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if strict {
		out["required"] = required
	}
	// A loose plan with calls needs no type: tool_calls is the default.
	return out
}

func nullNote(strict bool) string {
	if strict {
		return " null otherwise."
	}
	return ""
}

// strictSize checks s against the size limits of strict modes.
func strictSize(s map[string]any) []string {
	var st struct{ props, enums, chars, depth int }
	var problems []string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				depth++
				st.depth = max(st.depth, depth)
				st.props += len(props)
				for name, p := range props {
					st.chars += len(name)
					walk(p, depth)
				}
			}
			if e, ok := v["enum"].([]any); ok {
				st.enums += len(e)
				n := 0
				for _, x := range e {
					if s, ok := x.(string); ok {
						n += len(s)
					}
				}
				st.chars += n
				if len(e) > 250 && n > StrictMaxLargeEnumLength {
					problems = append(problems, fmt.Sprintf("an enum of %d values is %d characters long; strict modes allow %d for enums of more than 250 values", len(e), n, StrictMaxLargeEnumLength))
				}
			}
			for _, k := range []string{"items", "anyOf"} {
				walk(v[k], depth)
			}
		case []any:
			for _, x := range v {
				walk(x, depth)
			}
		}
	}
	walk(s, 0)
	if st.props > StrictMaxProperties {
		problems = append(problems, fmt.Sprintf("the schema has %d properties; strict modes allow %d", st.props, StrictMaxProperties))
	}
	if st.depth > StrictMaxDepth {
		problems = append(problems, fmt.Sprintf("objects nest %d deep; strict modes allow %d", st.depth, StrictMaxDepth))
	}
	if st.enums > StrictMaxEnumValues {
		problems = append(problems, fmt.Sprintf("the schema has %d enum values; strict modes allow %d", st.enums, StrictMaxEnumValues))
	}
	if st.chars > StrictMaxStringLength {
		problems = append(problems, fmt.Sprintf("property names and enum values total %d characters; strict modes allow %d", st.chars, StrictMaxStringLength))
	}
	return problems
}

// cleanArguments turns the planning tool's arguments into a plan document:
// the nulls a strict schema asks for are removed, and each call's arguments
// lose the nulls written for optional properties.
func (t *Tool) cleanArguments(raw json.RawMessage) json.RawMessage {
	var v any
	if err := llm.DecodeArguments(raw, &v); err != nil {
		return raw
	}
	if s, ok := v.(string); ok { // the plan sent as a JSON string
		if err := llm.DecodeArguments([]byte(s), &v); err != nil {
			return raw
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return raw
	}
	for _, k := range slices.Collect(maps.Keys(obj)) {
		if obj[k] == nil {
			delete(obj, k)
		}
	}
	if calls, ok := obj["calls"].([]any); ok {
		for _, c := range calls {
			t.cleanCall(c)
		}
		applyFlow(obj) // after the calls' own nulls are gone
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return b
}
