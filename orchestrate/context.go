package orchestrate

import (
	"fmt"

	"github.com/orchestra-mcp/orchestra/schemas"
)

// CallerContext is what a caller tells the planner besides the goal: extra
// instructions, the conversation so far and facts of its session (seed
// 003's agent_instructions and session_context). It reaches the planner's
// request and the answer's, within a token budget (planner.context_tokens).
type CallerContext struct {
	// Instructions are the caller's extra instructions.
	Instructions string `json:"instructions,omitempty"`
	// History is the conversation so far, oldest first.
	History []Turn `json:"history,omitempty"`
	// Facts are named facts of the caller's session.
	Facts map[string]any `json:"facts,omitempty"`
}

// Turn is one turn of a conversation.
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

var contextFields = []string{"instructions", "history", "facts", "agent_instructions", "session_context"}

// callerContext decodes the request's context; agent_instructions and
// session_context are accepted for instructions and facts.
func (d *decoder) callerContext(v any, path string) *CallerContext {
	if v == nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("context must be an object {instructions, history: [{role, content}], facts}, not %s", schemas.TypePhrase(v)))
		return nil
	}
	c := &CallerContext{}
	for _, k := range sortedKeys(obj) {
		val, at := obj[k], path+"."+k
		switch k {
		case "instructions", "agent_instructions":
			if s := d.str(val, at); s != "" {
				if c.Instructions != "" {
					c.Instructions += "\n"
				}
				c.Instructions += s
			}
		case "facts", "session_context":
			if val == nil {
				continue
			}
			m, ok := val.(map[string]any)
			if !ok {
				d.add(at, CodeInvalidValue, fmt.Sprintf("%s must be an object of named facts, not %s", k, schemas.TypePhrase(val)))
				continue
			}
			if c.Facts == nil {
				c.Facts = map[string]any{}
			}
			for name, f := range d.values(m, at).(map[string]any) {
				c.Facts[name] = f
			}
		case "history":
			turns, ok := val.([]any)
			if !ok && val != nil {
				d.add(at, CodeInvalidValue, fmt.Sprintf("history must be an array of {role, content}, not %s", schemas.TypePhrase(val)))
				continue
			}
			for i, t := range turns {
				tp := fmt.Sprintf("%s[%d]", at, i)
				m, ok := t.(map[string]any)
				if !ok {
					d.add(tp, CodeInvalidValue, fmt.Sprintf("a turn must be an object {role, content}, not %s", schemas.TypePhrase(t)))
					continue
				}
				c.History = append(c.History, Turn{Role: d.str(m["role"], tp+".role"), Content: d.str(m["content"], tp+".content")})
			}
		default:
			d.unknown(path, k, contextFields)
		}
	}
	return c
}
