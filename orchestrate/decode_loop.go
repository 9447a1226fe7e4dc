package orchestrate

import (
	"fmt"

	"github.com/orchestra-mcp/orchestra/schemas"
)

// Decoding the control flow of a step: for_each, as and do make a loop;
// when makes any step conditional.

// loopFields are the loop's fields of a step as written.
type loopFields struct {
	source, body       any
	haveSource, haveDo bool
}

func (l *loopFields) isLoop() bool { return l.haveSource || l.haveDo }

// flowField decodes one of for_each, as, do and when.
func (d *decoder) flowField(s *Step, l *loopFields, key string, val any, at string) {
	switch key {
	case "for_each":
		l.haveSource = true
		switch v := val.(type) {
		case string:
			s.ForEach = v
		case []any:
			s.ForEach = d.values(v, at)
		default:
			d.add(at, CodeInvalidValue, fmt.Sprintf("for_each must be a reference to an array, such as \"$list.output.items\", or an array, not %s", schemas.TypePhrase(val)))
		}
	case "as":
		s.As = d.str(val, at)
		if s.As != "" && (!isIdent(s.As) || s.As == "bindings") {
			d.add(at, CodeInvalidID, fmt.Sprintf("as %q is not usable in templates; names match [A-Za-z_][A-Za-z0-9_-]* and are not \"bindings\"", s.As))
		}
	case "do":
		l.body, l.haveDo = val, true
	case "when":
		s.When = d.str(val, at)
		if s.When == "" && val != nil {
			d.add(at, CodeInvalidValue, "when is empty; give a reference such as \"$check.output.ok\", or drop it")
		}
	}
}

// loop finishes decoding a loop step: its body is decoded with the one step
// decoder, so that any step (a tool, an agent, a group) may be a body.
func (d *decoder) loop(s *Step, path string, l *loopFields, group bool, top int) {
	switch {
	case !l.haveSource:
		d.add(path, CodeMissingField, "a step with \"do\" needs \"for_each\": the array to run it over, such as \"$list.output.items\"")
	case !l.haveDo:
		d.add(path, CodeMissingField, "a for_each step needs \"do\": the step to run for each element, e.g. {\"tool\": \"...\", \"arguments\": {\"path\": \"$item.path\"}}")
	}
	if s.Tool != "" || group {
		d.add(path, CodeInvalidValue, "a step is a tool call, a parallel group or a for_each loop, not two of them; put the tool call or the group in \"do\"")
	}
	if s.Arguments != nil {
		d.add(path+".arguments", CodeInvalidValue, "a for_each step has no arguments; give them to the step in \"do\"")
	}
	if s.TimeoutMS != 0 || s.Retry != nil {
		d.add(path, CodeInvalidValue, "timeout_ms and retry belong to tool steps; set them on the step in \"do\"")
	}
	switch s.Merge {
	case "":
		s.Merge = MergeCollect
	case MergeFirstSuccess:
		d.add(path+".merge", CodeInvalidValue, fmt.Sprintf("a for_each loop merges with %q or %q, not %q", MergeCollect, MergeAllSettled, s.Merge))
	}
	if s.As == "" {
		s.As = "item"
	}
	if !l.haveDo {
		return
	}
	if l.body == nil {
		d.add(path+".do", CodeInvalidValue, "do must be a step, not null")
		return
	}
	s.Do = d.step(l.body, path+".do", s, top, 0)
}
