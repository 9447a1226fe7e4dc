package planner

import (
	"slices"

	"github.com/orchestra-mcp/orchestra/registry"
)

// Loops and conditions in the planner's format: the calls stay a flat list
// of tool calls, and "flow" puts one of them in a loop or under a
// condition. The cost is the same for every catalog, one optional property,
// not one per tool, and nothing when no offered tool returns an array to
// loop over.

// flowNote teaches flow in the system prompt.
const flowNote = `Loops and conditions: "flow": [{"call": 1, "for_each": "$0.output.files", "when": null}] runs call 1 once per element of that array, "$item" (and "$item_index") in its arguments; $1.output is then the array of its outputs. {"call": 2, "when": "$1.output.ok", "for_each": null} runs call 2 only if that value is truthy. Otherwise "flow": null.`

// flowSchema is the schema of the flow property.
func flowSchema(strict bool) map[string]any {
	str := map[string]any{"type": "string"}
	arr := map[string]any{"type": "array", "items": map[string]any{
		"type": "object",
		"properties": map[string]any{
			"call":     map[string]any{"type": "integer"},
			"for_each": str,
			"when":     str,
		},
		"required":             []any{"call"},
		"additionalProperties": false,
	}}
	if !strict { // the prompt's flow note names the fields
		return map[string]any{"type": "array", "items": map[string]any{"type": "object"}}
	}
	if strict {
		str["type"] = []any{"string", "null"}
		arr["type"] = []any{"array", "null"}
		arr["items"].(map[string]any)["required"] = []any{"call", "for_each", "when"}
	}
	return arr
}

// applyFlow rewrites the calls of a plan document by its flow: a call with
// for_each becomes a loop whose body is the call, a call with when gets the
// condition. An entry that names no call is left in the plan, where
// validation reports it.
func applyFlow(obj map[string]any) {
	flow, ok := obj["flow"].([]any)
	if !ok {
		delete(obj, "flow")
		return
	}
	calls, _ := obj["calls"].([]any)
	var left []any
	for _, f := range flow {
		fm, ok := f.(map[string]any)
		n, isNum := fm["call"].(float64)
		if !ok || !isNum || n < 0 || int(n) >= len(calls) || n != float64(int(n)) {
			left = append(left, f)
			continue
		}
		i := int(n)
		call, ok := calls[i].(map[string]any)
		if !ok {
			left = append(left, f)
			continue
		}
		step := call
		if src, ok := fm["for_each"].(string); ok && src != "" {
			id, _ := call["id"].(string)
			delete(call, "id")
			step = map[string]any{"for_each": src, "do": call}
			if id != "" {
				step["id"] = id
			}
		}
		if cond, ok := fm["when"].(string); ok && cond != "" {
			step["when"] = cond
		}
		calls[i] = step
	}
	if len(left) > 0 {
		obj["flow"] = left // refused by the decoder, with its path
		return
	}
	delete(obj, "flow")
}

// returnsArrays reports whether a tool among tools has an array in its
// output: something a loop can run over.
func returnsArrays(tools []registry.Tool) bool {
	return slices.ContainsFunc(tools, func(t registry.Tool) bool {
		v, err := toMap(t.OutputSchema)
		return err == nil && hasArray(v)
	})
}

func hasArray(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if v["type"] == "array" || v["items"] != nil {
			return true
		}
		if ts, ok := v["type"].([]any); ok && slices.Contains(ts, any("array")) {
			return true
		}
		for _, e := range v {
			if hasArray(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, hasArray)
	}
	return false
}

// withFlow adds the flow property to a planning schema that has calls,
// when flow is set.
func withFlow(s map[string]any, flow, strict bool) map[string]any {
	props := s["properties"].(map[string]any)
	if !flow || props["calls"] == nil {
		return s
	}
	props["flow"] = flowSchema(strict)
	if strict {
		s["required"] = append(s["required"].([]any), "flow")
	}
	return s
}
