package orchestrate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/orchestra-mcp/orchestra/schemas"
)

var stepFields = []string{
	"id", "result_key", "description", "tool", "tool_name", "arguments", "args", "with", "agent", "agent_id", "action", "action_id", "prompt",
	"timeout_ms", "retry", "on_error", "parallel", "steps", "type", "max_concurrency", "merge", "merge_strategy",
	"for_each", "as", "do", "when",
}

func (d *decoder) step(v any, path string, parent *Step, top, pos int) *Step {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("a step must be an object like {\"tool\": \"...\", \"arguments\": {...}}, not %s", schemas.TypePhrase(v)))
		return nil
	}
	s := &Step{index: top, path: path, parent: parent}
	if parent != nil {
		s.depth = parent.depth + 1
	}
	var agentID, actionID, prompt, typ string
	var children, with any
	haveChildren, haveWith := false, false
	var loop loopFields
	setTool := func(at, name string) {
		if s.Tool != "" && s.Tool != name {
			d.add(at, CodeInvalidValue, fmt.Sprintf("the step names two tools, %q and %q; keep one", s.Tool, name))
		}
		s.Tool = name
	}
	setArgs := func(at string, val any) {
		if s.Arguments != nil {
			d.add(at, CodeInvalidValue, "the step has arguments twice (arguments, args or with); keep one")
			return
		}
		if val == nil {
			s.Arguments = map[string]any{}
			return
		}
		m, ok := val.(map[string]any)
		if !ok {
			d.add(at, CodeInvalidValue, fmt.Sprintf("arguments must be an object of named arguments, not %s", schemas.TypePhrase(val)))
			return
		}
		s.Arguments = d.values(m, at).(map[string]any)
	}
	for _, k := range sortedKeys(obj) {
		val := obj[k]
		at := path + "." + k
		switch k {
		case "id":
			if n, ok := val.(json.Number); ok {
				s.ID = n.String()
			} else {
				s.ID = d.str(val, at)
			}
			s.explicit = s.ID != ""
		case "result_key":
			s.ResultKey = d.str(val, at)
		case "description":
			s.Description = d.str(val, at)
		case "tool", "tool_name":
			setTool(at, d.str(val, at))
		case "arguments", "args":
			setArgs(at, val)
		case "with":
			with, haveWith = val, true
		case "agent", "agent_id":
			if agentID != "" {
				d.add(at, CodeInvalidValue, "the step names its agent twice (agent and agent_id); keep one")
			}
			agentID = d.str(val, at)
		case "action", "action_id":
			if actionID != "" {
				d.add(at, CodeInvalidValue, "the step names its action twice (action and action_id); keep one")
			}
			actionID = d.str(val, at)
		case "prompt":
			prompt = d.str(val, at)
		case "timeout_ms":
			s.TimeoutMS = d.posInt(val, at)
		case "retry":
			s.Retry = d.retry(val, at)
		case "on_error":
			s.OnError = d.str(val, at)
			if s.OnError != "" && s.OnError != OnErrorHalt && s.OnError != OnErrorContinue {
				d.add(at, CodeInvalidValue, fmt.Sprintf("on_error must be %q or %q, not %q", OnErrorHalt, OnErrorContinue, s.OnError))
			}
		case "parallel", "steps":
			if haveChildren {
				d.add(at, CodeInvalidValue, "a group lists its children once, under \"parallel\"")
				continue
			}
			children, haveChildren = val, true
		case "for_each", "as", "do", "when":
			d.flowField(s, &loop, k, val, at)
		case "type":
			typ = d.str(val, at)
			if typ != "" && typ != "tool" && typ != "agent" && typ != "parallel" && typ != "for_each" {
				d.add(at, CodeInvalidValue, fmt.Sprintf("step type must be \"tool\", \"agent\", \"parallel\" or \"for_each\", not %q", typ))
			}
		case "max_concurrency":
			s.MaxConcurrency = d.posInt(val, at)
		case "merge", "merge_strategy":
			s.Merge = d.str(val, at)
			if s.Merge == "collect_all" {
				s.Merge = MergeCollect
			}
			if s.Merge != "" && s.Merge != MergeCollect && s.Merge != MergeFirstSuccess && s.Merge != MergeAllSettled {
				d.add(at, CodeInvalidValue, fmt.Sprintf("merge must be %q, %q or %q, not %q", MergeCollect, MergeFirstSuccess, MergeAllSettled, s.Merge))
			}
		default:
			d.unknown(path, k, stepFields)
		}
	}
	switch {
	case agentID != "" || typ == "agent":
		d.agentStep(s, path, agentID, actionID, prompt, with, haveWith, setTool)
	default:
		if haveWith {
			setArgs(path+".with", with)
		}
		if actionID != "" {
			d.add(path+".action", CodeInvalidValue, "action needs agent: name the agent whose action this is")
		}
		if prompt != "" {
			if s.Arguments == nil {
				s.Arguments = map[string]any{}
			}
			if _, dup := s.Arguments["prompt"]; dup {
				d.add(path+".prompt", CodeInvalidValue, "prompt is given both as a step field and as an argument; keep one")
			}
			s.Arguments["prompt"] = prompt
		}
		// A tool step that calls an agent's tool is an agent step.
		if name, ok := strings.CutPrefix(s.Tool, AgentToolPrefix); ok && name != "" {
			s.Agent = name
		}
	}

	// Ids default to the step's position. A group's id is settled before its
	// children are decoded, since theirs derive from it; an id equal to its
	// default (as in a normalized plan) is no explicit id.
	defaultID := strconv.Itoa(top)
	if parent != nil {
		defaultID = parent.ID + "." + strconv.Itoa(pos)
	}
	if s.explicit && s.ID == defaultID {
		s.explicit = false
	}
	if !s.explicit {
		s.ID = defaultID
	}

	switch {
	case loop.isLoop():
		d.loop(s, path, &loop, haveChildren || typ == "parallel", top)
	case haveChildren && s.Tool != "":
		d.add(path, CodeInvalidValue, "a step is either a tool call (tool, arguments) or a parallel group (parallel), not both")
	case haveChildren:
		arr, ok := children.([]any)
		if !ok {
			d.add(path+".parallel", CodeInvalidValue, fmt.Sprintf("parallel must be an array of steps, not %s", schemas.TypePhrase(children)))
			break
		}
		if len(arr) == 0 {
			d.add(path+".parallel", CodeEmptyPlan, "a parallel group needs at least one child step")
		}
		s.Parallel = make([]*Step, 0, len(arr))
		for i, cv := range arr {
			if c := d.step(cv, fmt.Sprintf("%s.parallel[%d]", path, i), s, top, i); c != nil {
				s.Parallel = append(s.Parallel, c)
			}
		}
		if s.Arguments != nil {
			d.add(path+".arguments", CodeInvalidValue, "a parallel group has no arguments; give them to its children")
		}
		if s.TimeoutMS != 0 || s.Retry != nil {
			d.add(path, CodeInvalidValue, "timeout_ms and retry belong to tool steps, not to parallel groups; set them on the children")
		}
		if s.Merge == "" {
			s.Merge = MergeCollect
		}
	default:
		if typ == "parallel" {
			d.add(path, CodeMissingField, "a parallel step needs \"parallel\": [steps]")
		} else if s.Tool == "" {
			d.add(path, CodeMissingField, "the step names no tool; add \"tool\": \"<tool name>\" (or \"parallel\": [...] for a group)")
		}
		if s.MaxConcurrency != 0 || s.Merge != "" {
			d.add(path, CodeInvalidValue, "max_concurrency and merge belong to parallel groups, not to tool steps")
		}
		if s.Arguments == nil {
			s.Arguments = map[string]any{}
		}
	}

	if s.As != "" && !loop.isLoop() {
		d.add(path+".as", CodeInvalidValue, "as names the element of a for_each loop; this step has no for_each")
	}

	// Explicit ids must be usable in templates.
	if s.explicit {
		if !isIdent(s.ID) {
			d.add(path+".id", CodeInvalidID, fmt.Sprintf("step id %q is not usable in templates; ids match [A-Za-z_][A-Za-z0-9_-]* (no dots, not a bare number)", s.ID))
		}
		if s.ID == "bindings" {
			d.add(path+".id", CodeInvalidID, "\"bindings\" is reserved for $bindings references; choose another id")
		}
	}
	if s.ResultKey != "" && (!isIdent(s.ResultKey) || s.ResultKey == "bindings") {
		d.add(path+".result_key", CodeInvalidID, fmt.Sprintf("result_key %q is not usable in templates; keys match [A-Za-z_][A-Za-z0-9_-]* and are not \"bindings\"", s.ResultKey))
	}
	switch {
	case s.ResultKey != "":
		s.key = s.ResultKey
	case s.explicit:
		s.key = s.ID
	default:
		s.key = strconv.Itoa(pos)
	}
	return s
}

func (d *decoder) retry(v any, path string) *Retry {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("retry must be an object like {\"max_attempts\": 3, \"backoff_ms\": 200}, not %s", schemas.TypePhrase(v)))
		return nil
	}
	r := &Retry{}
	for _, k := range sortedKeys(obj) {
		at := path + "." + k
		switch k {
		case "max_attempts":
			r.MaxAttempts = d.posInt(obj[k], at)
		case "backoff_ms":
			r.BackoffMS = d.nonNegInt(obj[k], at)
		case "max_backoff_ms":
			r.MaxBackoffMS = d.nonNegInt(obj[k], at)
		default:
			d.unknown(path, k, []string{"max_attempts", "backoff_ms", "max_backoff_ms"})
		}
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 1
	}
	return r
}

// agentStep completes an agent step: it calls the agent's catalog tool with
// the AgentHost request made of the step's prompt, with and action. A
// normalized agent step (tool and arguments already set) decodes to itself.
func (d *decoder) agentStep(s *Step, path, agent, action, prompt string, with any, haveWith bool, setTool func(at, name string)) {
	if agent == "" {
		if name, ok := strings.CutPrefix(s.Tool, AgentToolPrefix); ok && name != "" {
			agent = name
		} else {
			d.add(path+".agent", CodeMissingField, "an agent step names its agent: \"agent\": \"<name>\"")
			return
		}
	}
	s.Agent = agent
	setTool(path+".agent", AgentToolPrefix+agent)
	if prompt == "" && !haveWith && action == "" {
		return // the request is in arguments, or empty
	}
	if len(s.Arguments) > 0 {
		d.add(path+".arguments", CodeInvalidValue, "an agent step takes prompt, with and action, or arguments (the agent's request), not both")
		return
	}
	s.Arguments = map[string]any{}
	if prompt != "" {
		s.Arguments["user_query"] = prompt
	}
	if action != "" {
		s.Arguments["action"] = action
	}
	if haveWith && with != nil {
		m, ok := with.(map[string]any)
		if !ok {
			d.add(path+".with", CodeInvalidValue, fmt.Sprintf("with must be an object of named parameters, not %s", schemas.TypePhrase(with)))
			return
		}
		s.Arguments["parsed_parameters"] = d.values(m, path+".with")
	}
}
