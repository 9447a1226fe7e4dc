package planner

import (
	"maps"
	"slices"
)

// The planner teaches the plan's structure, not only a list of calls:
// parallel groups, result keys, the dag schedule, on_error and retry. The
// planning schema carries them (strict and loose alike) and the prompt says
// when to use them, in few words: every planning call pays for them.

const promptStructure = `Optional: {"parallel": [call, call], "result_key": "g"} as one item of calls runs independent calls at once; "result_key": "k" on a call names its output $k.output; "schedule": "dag" starts each call once the calls it references are done; on a call, "on_error": "continue" goes on after a failure (output null), "retry": {"max_attempts": 3, "backoff_ms": 200} retries timeouts.`

// Values the planning schema offers for a step's fields.
var (
	onErrorValues  = []any{"halt", "continue"}
	scheduleValues = []any{"sequential", "dag"}
)

// withStepFields adds the fields any call may carry — result_key,
// on_error, retry — to the strict schema of one call (callSchema). The
// loose schema leaves them to the prompt.
func withStepFields(call map[string]any) map[string]any {
	props := maps.Clone(call["properties"].(map[string]any))
	maps.Copy(props, stepFields())
	call["properties"] = props
	call["required"] = sortedNames(props)
	return call
}

// stepFields are the optional fields of a step, nullable: a strict schema
// requires every property.
func stepFields() map[string]any {
	retry := map[string]any{"type": "object", "properties": map[string]any{
		"max_attempts": nullable(map[string]any{"type": "integer"}),
		"backoff_ms":   nullable(map[string]any{"type": "integer"}),
	}, "required": []any{"backoff_ms", "max_attempts"}, "additionalProperties": false}
	return map[string]any{
		"result_key": nullable(map[string]any{"type": "string"}),
		"on_error":   nullable(map[string]any{"type": "string", "enum": onErrorValues}),
		"retry":      nullable(retry),
	}
}

// groupSchema is the strict schema of a parallel group among the calls;
// item is the schema of one of its calls.
func groupSchema(item any) map[string]any {
	props := map[string]any{
		"parallel":   map[string]any{"type": "array", "items": item},
		"result_key": stepFields()["result_key"],
	}
	return map[string]any{"type": "object", "properties": props, "required": sortedNames(props), "additionalProperties": false}
}

// withStructure adds the plan's schedule and the parallel group to the
// planning schema's properties, and returns the items of calls. A strict
// schema must be self-contained and takes no free-form object, so a
// group's calls repeat the tools' call schemas (groupCalls: the tool's
// name, its arguments and a result_key); a loose one only names the group
// and the schedule, which the prompt teaches (the plan is validated anyway).
func withStructure(props map[string]any, calls, groupCalls []any, strict bool) any {
	sched := map[string]any{"type": "string", "enum": scheduleValues}
	var item any = map[string]any{"type": "object"}
	if strict {
		props["schedule"] = nullable(sched)
		item = groupCalls[0]
		if len(groupCalls) > 1 {
			item = map[string]any{"anyOf": groupCalls}
		}
		return map[string]any{"anyOf": append(slices.Clone(calls), groupSchema(item))}
	}
	// Loose: the prompt teaches the group; the schema only names it.
	props["schedule"] = map[string]any{"enum": scheduleValues}
	group := map[string]any{"properties": map[string]any{"parallel": map[string]any{"type": "array", "items": item}}, "required": []any{"parallel"}}
	return map[string]any{"anyOf": append(slices.Clone(calls), group)}
}

// groupCall is the strict schema of a call inside a group: the tool's
// name, its arguments and a result_key, by which later calls reach its
// output.
func groupCall(name string, args any) map[string]any {
	c := callSchema(name, args)
	props := maps.Clone(c["properties"].(map[string]any))
	props["result_key"] = stepFields()["result_key"]
	c["properties"] = props
	c["required"] = sortedNames(props)
	return c
}

func sortedNames(m map[string]any) []any {
	names := slices.Sorted(maps.Keys(m))
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out
}

// cleanCall removes the nulls a strict schema made the model write for a
// call's optional fields, in a group's calls too, and the nulls of its
// arguments' optional properties.
func (t *Tool) cleanCall(c any) {
	cm, ok := c.(map[string]any)
	if !ok {
		return
	}
	for _, k := range slices.Collect(maps.Keys(cm)) {
		if cm[k] == nil {
			delete(cm, k)
		}
	}
	if r, ok := cm["retry"].(map[string]any); ok {
		for _, k := range slices.Collect(maps.Keys(r)) {
			if r[k] == nil {
				delete(r, k)
			}
		}
	}
	if name, _ := cm["tool_name"].(string); name != "" {
		if args, ok := cm["arguments"].(map[string]any); ok {
			cm["arguments"] = stripNulls(args, t.inputs[name])
		}
	}
	if group, ok := cm["parallel"].([]any); ok {
		for _, child := range group {
			t.cleanCall(child)
		}
	}
}
