package orchestrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/orchestra-mcp/orchestra/internal/suggest"
)

// Schedules.
const (
	// ScheduleSequential runs top-level steps one after another (the default).
	ScheduleSequential = "sequential"
	// ScheduleDAG starts each step as soon as every step it references ended.
	ScheduleDAG = "dag"
)

// Merge strategies of a parallel group.
const (
	// MergeCollect: the group's output is an object keyed by child.
	MergeCollect = "collect"
	// MergeFirstSuccess: the first child to succeed wins; the rest are cancelled.
	MergeFirstSuccess = "first_success"
	// MergeAllSettled: every child runs; failed children leave null.
	MergeAllSettled = "all_settled"
)

// On-error policies of a step.
const (
	OnErrorHalt     = "halt"
	OnErrorContinue = "continue"
)

// Plan is a list of steps to run. Its JSON form is the "plan" of the
// agent_orchestrate input.
type Plan struct {
	// Type is "tool_calls" or "direct_response" when the plan came in seed
	// 000's planner format.
	Type string `json:"type,omitempty"`
	// Reasoning is the planner's explanation, kept for the record.
	Reasoning string `json:"reasoning,omitempty"`
	// Content is the answer of a direct_response plan, which runs nothing.
	Content string `json:"content,omitempty"`
	// Schedule is "sequential" (default) or "dag".
	Schedule string `json:"schedule,omitempty"`
	// Steps are the steps, in order.
	Steps []*Step `json:"steps"`
}

// Step is a tool call or a parallel group.
type Step struct {
	ID          string `json:"id"`
	ResultKey   string `json:"result_key,omitempty"`
	Description string `json:"description,omitempty"`

	// A tool step.
	Tool      string         `json:"tool,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	TimeoutMS int            `json:"timeout_ms,omitempty"`
	Retry     *Retry         `json:"retry,omitempty"`
	OnError   string         `json:"on_error,omitempty"`

	// A parallel group.
	Parallel       []*Step `json:"parallel,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	Merge          string  `json:"merge,omitempty"`

	index    int    // the top-level index this step is or is under
	path     string // where it is in the plan: steps[1].parallel[0]
	key      string // its key in its group's collected output
	explicit bool   // whether the id was given
	parent   *Step
	depth    int // group nesting: 0 for top-level steps
}

// Retry says how often a step is tried on transient failures.
type Retry struct {
	// MaxAttempts counts every attempt, the first one included.
	MaxAttempts int `json:"max_attempts"`
	// BackoffMS is the wait before the second attempt; it doubles after that.
	BackoffMS int `json:"backoff_ms,omitempty"`
	// MaxBackoffMS caps the wait between attempts.
	MaxBackoffMS int `json:"max_backoff_ms,omitempty"`
}

// IsGroup reports whether s is a parallel group.
func (s *Step) IsGroup() bool { return s.Parallel != nil }

// Index returns the top-level index of s or of the group it is in.
func (s *Step) Index() int { return s.index }

// Path returns where s is in the plan, e.g. "steps[1].parallel[0]".
func (s *Step) Path() string { return s.path }

// Key returns the key of s in its group's collected output.
func (s *Step) Key() string { return s.key }

// Leaves returns the tool steps of the plan, in plan order.
func (p *Plan) Leaves() []*Step {
	var out []*Step
	var walk func([]*Step)
	walk = func(steps []*Step) {
		for _, s := range steps {
			if s.IsGroup() {
				walk(s.Parallel)
			} else {
				out = append(out, s)
			}
		}
	}
	walk(p.Steps)
	return out
}

// All returns every step of the plan, groups before their children.
func (p *Plan) All() []*Step {
	var out []*Step
	var walk func([]*Step)
	walk = func(steps []*Step) {
		for _, s := range steps {
			out = append(out, s)
			walk(s.Parallel)
		}
	}
	walk(p.Steps)
	return out
}

// Request is the input of one orchestration.
type Request struct {
	// Plan is the plan to run. Exactly one of Plan and Prompt is set.
	Plan *Plan `json:"plan,omitempty"`
	// Prompt is a natural-language goal for the planner.
	Prompt string `json:"prompt,omitempty"`
	// Bindings are values templates reach as $bindings.name.
	Bindings map[string]any `json:"bindings,omitempty"`
	// TimeoutMS bounds the whole plan; 0 uses the configured limit.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// MaxParallel caps how many tool steps run at once; 0 uses the limit.
	MaxParallel int `json:"max_parallel,omitempty"`
	// DryRun validates and returns the normalized plan without running it.
	DryRun bool `json:"dry_run,omitempty"`
	// Fallback is "reactive" to fall back to a tool loop when planning fails.
	Fallback string `json:"fallback,omitempty"`
}

// Issue is a problem with a request or a plan: a validation error or a
// warning. Every issue names where it is and how to fix it.
type Issue struct {
	// Step is the top-level index of the step the issue is about.
	Step *int `json:"step,omitempty"`
	// StepID is the id of the (possibly nested) step.
	StepID string `json:"step_id,omitempty"`
	// Path is where in the input the issue is, e.g. "plan.steps[1].arguments.topic".
	Path string `json:"path,omitempty"`
	// Argument is the top-level argument name, for argument issues.
	Argument string `json:"argument,omitempty"`
	// Template is the template involved, as written.
	Template string `json:"template,omitempty"`
	// Code is a stable identifier of the kind of problem.
	Code string `json:"code"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
	// AvailableFields lists what exists where a field was not found.
	AvailableFields []string `json:"available_fields,omitempty"`
	// Suggestions are the closest known names to an unknown one.
	Suggestions []string `json:"suggestions,omitempty"`
}

func (i *Issue) Error() string {
	var b strings.Builder
	if i.Path != "" {
		b.WriteString(i.Path)
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	return b.String()
}

// Issue codes.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidRequest   = "invalid_request"
	CodeUnknownField     = "unknown_field"
	CodeInvalidValue     = "invalid_value"
	CodeMissingField     = "missing_field"
	CodeEmptyPlan        = "empty_plan"
	CodeUnknownTool      = "unknown_tool"
	CodeForbiddenTool    = "forbidden_tool"
	CodeInvalidArguments = "invalid_arguments"
	CodeBadTemplate      = "bad_template"
	CodeUnknownRef       = "unknown_ref"
	CodeSelfRef          = "self_ref"
	CodeForwardRef       = "forward_ref"
	CodeSiblingRef       = "sibling_ref"
	CodeUnknownBinding   = "unknown_binding"
	CodeFieldNotFound    = "field_not_found"
	CodeTypeMismatch     = "type_mismatch"
	CodeDuplicateID      = "duplicate_id"
	CodeInvalidID        = "invalid_id"
	CodeTooManySteps     = "too_many_steps"
	CodeTooDeep          = "too_deep"
	CodeTooLarge         = "too_large"

	// Warnings.
	CodeUncheckedRef  = "unchecked_reference"
	CodeNotATemplate  = "not_a_template"
	CodeSchemaProblem = "schema_unusable"
	CodeMustache      = "mustache_placeholder"
)

// DecodeRequest decodes the input of agent_orchestrate, or a bare plan, and
// normalizes it. It reports every problem it finds, each with its path; a
// request with issues must not run.
//
// Accepted plan shapes: {"steps": [...]}, seed 000's
// {"type": "tool_calls", "calls": [{"tool_name", "arguments"}]} and
// {"type": "direct_response", "content": "..."}, and seed 001's field names
// (result_key, merge_strategy, agent_id/action_id/prompt/with).
func DecodeRequest(data []byte) (*Request, []*Issue) { return decodeRequest(data, true) }

// decodeInput decodes the input of agent_orchestrate as its input schema
// says: a bare plan ({"steps": [...]} at the top) is refused with a hint
// to wrap it in "plan".
func decodeInput(data []byte) (*Request, []*Issue) { return decodeRequest(data, false) }

func decodeRequest(data []byte, bare bool) (*Request, []*Issue) {
	v, issue := decodeJSON(data)
	if issue != nil {
		return nil, []*Issue{issue}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []*Issue{{Code: CodeInvalidRequest, Message: fmt.Sprintf("the input is %s; send a JSON object: {\"plan\": {\"steps\": [...]}} or {\"prompt\": \"...\"}", jsonTypeOf(v))}}
	}
	d := &decoder{bare: bare}
	req := d.request(obj)
	if len(d.issues) > 0 {
		return nil, d.issues
	}
	return req, nil
}

// DecodePlan decodes and normalizes a plan on its own.
func DecodePlan(data []byte) (*Plan, []*Issue) {
	v, issue := decodeJSON(data)
	if issue != nil {
		return nil, []*Issue{issue}
	}
	d := &decoder{}
	p := d.plan(v, "plan")
	if len(d.issues) > 0 {
		return nil, d.issues
	}
	return p, nil
}

// decodeJSON decodes one JSON value, with numbers checked for range.
func decodeJSON(data []byte) (any, *Issue) {
	if !utf8.Valid(data) {
		return nil, &Issue{Code: CodeInvalidJSON, Message: "the input is not valid UTF-8; send UTF-8 encoded JSON"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Issue{Code: CodeInvalidJSON, Message: describeJSONError(data, err)}
	}
	if dec.More() {
		return nil, &Issue{Code: CodeInvalidJSON, Message: fmt.Sprintf("unexpected data after the JSON value at offset %d; send exactly one JSON object", dec.InputOffset())}
	}
	return v, nil
}

func describeJSONError(data []byte, err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("invalid JSON at offset %d: %v; check quotes, commas and brackets", syn.Offset, err)
	}
	if errors.Is(err, errEOF) || strings.Contains(err.Error(), "unexpected EOF") || len(bytes.TrimSpace(data)) == 0 {
		return "the JSON input is empty or truncated; send one complete JSON object"
	}
	return fmt.Sprintf("invalid JSON: %v", err)
}

var errEOF = errors.New("EOF")

type decoder struct {
	issues []*Issue
	bare   bool // a request may be a bare plan
}

func (d *decoder) add(path, code, msg string, suggestions ...string) {
	d.issues = append(d.issues, &Issue{Path: path, Code: code, Message: msg, Suggestions: suggestions})
}

var requestFields = []string{"plan", "prompt", "bindings", "timeout_ms", "max_parallel", "dry_run", "fallback"}

func (d *decoder) request(obj map[string]any) *Request {
	if _, ok := obj["plan"]; !ok {
		if _, ok := obj["prompt"]; !ok && looksLikePlan(obj) {
			if !d.bare {
				d.add("", CodeInvalidRequest, "the plan's fields (steps, type, schedule) are at the top level of the input; wrap the plan: {\"plan\": {\"steps\": [...]}}")
				return &Request{}
			}
			// A bare plan.
			return &Request{Plan: d.plan(obj, "plan")}
		}
	}
	req := &Request{}
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		switch k {
		case "plan":
			if s, ok := v.(string); ok {
				// Models sometimes send the plan as a JSON string.
				inner, issue := decodeJSON([]byte(s))
				if issue != nil {
					d.add("plan", CodeInvalidValue, "plan is a string that is not valid JSON ("+issue.Message+"); send the plan as a JSON object")
					continue
				}
				v = inner
			}
			if v != nil {
				req.Plan = d.plan(v, "plan")
			}
		case "prompt":
			req.Prompt = d.str(v, "prompt")
		case "bindings":
			if v == nil {
				continue
			}
			m, ok := v.(map[string]any)
			if !ok {
				d.add("bindings", CodeInvalidValue, fmt.Sprintf("bindings must be an object of named values, not %s", jsonTypeOf(v)))
				continue
			}
			for name := range m {
				if !isIdent(name) {
					d.add("bindings."+name, CodeInvalidID, fmt.Sprintf("binding name %q is not usable in templates; names match [A-Za-z_][A-Za-z0-9_-]*", name))
				}
			}
			req.Bindings = d.values(m, "bindings").(map[string]any)
		case "timeout_ms":
			req.TimeoutMS = d.posInt(v, "timeout_ms")
		case "max_parallel":
			req.MaxParallel = d.posInt(v, "max_parallel")
		case "dry_run":
			b, ok := v.(bool)
			if !ok {
				d.add("dry_run", CodeInvalidValue, fmt.Sprintf("dry_run must be true or false, not %s", jsonTypeOf(v)))
			}
			req.DryRun = b
		case "fallback":
			req.Fallback = d.str(v, "fallback")
			if req.Fallback != "" && req.Fallback != "reactive" && req.Fallback != "none" {
				d.add("fallback", CodeInvalidValue, fmt.Sprintf("fallback must be \"reactive\" or \"none\", not %q", req.Fallback))
			}
		default:
			d.unknown("", k, requestFields)
		}
	}
	switch {
	case req.Plan != nil && req.Prompt != "":
		d.add("", CodeInvalidRequest, "both plan and prompt are set; send exactly one: a plan to run it as written, or a prompt to have the planner write one")
	case req.Plan == nil && req.Prompt == "" && len(d.issues) == 0:
		d.add("", CodeInvalidRequest, "neither plan nor prompt is set; send {\"plan\": {\"steps\": [...]}} or {\"prompt\": \"what to do\"}")
	}
	return req
}

func looksLikePlan(obj map[string]any) bool {
	for _, k := range []string{"steps", "calls", "type", "schedule"} {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

var planFields = []string{"steps", "schedule", "type", "reasoning", "calls", "content"}

func (d *decoder) plan(v any, path string) *Plan {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("a plan must be an object like {\"steps\": [...]}, not %s", jsonTypeOf(v)))
		return nil
	}
	p := &Plan{}
	var steps any
	haveSteps := false
	for _, k := range sortedKeys(obj) {
		val := obj[k]
		at := path + "." + k
		switch k {
		case "steps", "calls":
			if haveSteps {
				d.add(at, CodeInvalidValue, "a plan has either steps or calls (seed 000's name for them), not both")
				continue
			}
			steps, haveSteps = val, true
		case "schedule":
			p.Schedule = d.str(val, at)
			if p.Schedule != "" && p.Schedule != ScheduleSequential && p.Schedule != ScheduleDAG {
				d.add(at, CodeInvalidValue, fmt.Sprintf("schedule must be %q or %q, not %q", ScheduleSequential, ScheduleDAG, p.Schedule))
			}
		case "type":
			p.Type = d.str(val, at)
			if p.Type != "" && p.Type != "tool_calls" && p.Type != "direct_response" {
				d.add(at, CodeInvalidValue, fmt.Sprintf("type must be \"tool_calls\" or \"direct_response\", not %q", p.Type))
			}
		case "reasoning":
			p.Reasoning = d.str(val, at)
		case "content":
			p.Content = d.str(val, at)
		default:
			d.unknown(path, k, planFields)
		}
	}
	if p.Type == "direct_response" {
		if haveSteps {
			if arr, ok := steps.([]any); ok && len(arr) > 0 {
				d.add(path, CodeInvalidValue, "a direct_response plan runs nothing; drop its steps or use type \"tool_calls\"")
			}
		}
		p.Steps = []*Step{}
		return p
	}
	if p.Content != "" {
		d.add(path+".content", CodeInvalidValue, "content belongs only to type \"direct_response\" plans")
	}
	if !haveSteps {
		d.add(path, CodeMissingField, "the plan has no steps; add \"steps\": [{\"tool\": \"...\", \"arguments\": {...}}]")
		return p
	}
	arr, ok := steps.([]any)
	if !ok {
		d.add(path+".steps", CodeInvalidValue, fmt.Sprintf("steps must be an array, not %s", jsonTypeOf(steps)))
		return p
	}
	if len(arr) == 0 {
		d.add(path+".steps", CodeEmptyPlan, "the plan has no steps; add at least one, or send a direct_response")
	}
	p.Steps = make([]*Step, 0, len(arr))
	for i, sv := range arr {
		if s := d.step(sv, fmt.Sprintf("%s.steps[%d]", path, i), nil, i, i); s != nil {
			p.Steps = append(p.Steps, s)
		}
	}
	if p.Schedule == "" {
		p.Schedule = ScheduleSequential
	}
	if p.Type == "" {
		p.Type = "tool_calls"
	}
	return p
}

var stepFields = []string{
	"id", "result_key", "description", "tool", "tool_name", "arguments", "args", "with", "agent_id", "action_id", "prompt",
	"timeout_ms", "retry", "on_error", "parallel", "steps", "type", "max_concurrency", "merge", "merge_strategy",
}

func (d *decoder) step(v any, path string, parent *Step, top, pos int) *Step {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("a step must be an object like {\"tool\": \"...\", \"arguments\": {...}}, not %s", jsonTypeOf(v)))
		return nil
	}
	s := &Step{index: top, path: path, parent: parent}
	if parent != nil {
		s.depth = parent.depth + 1
	}
	var agentID, actionID, prompt, typ string
	var children any
	haveChildren := false
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
			d.add(at, CodeInvalidValue, fmt.Sprintf("arguments must be an object of named arguments, not %s", jsonTypeOf(val)))
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
		case "arguments", "args", "with":
			setArgs(at, val)
		case "agent_id":
			agentID = d.str(val, at)
		case "action_id":
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
		case "type":
			typ = d.str(val, at)
			if typ != "" && typ != "tool" && typ != "agent" && typ != "parallel" {
				d.add(at, CodeInvalidValue, fmt.Sprintf("step type must be \"tool\" or \"parallel\", not %q", typ))
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
	if agentID != "" {
		name := agentID
		if actionID != "" {
			name = agentID + "__" + actionID
		}
		setTool(path+".agent_id", name)
	} else if actionID != "" {
		d.add(path+".action_id", CodeInvalidValue, "action_id needs agent_id")
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
	case haveChildren && s.Tool != "":
		d.add(path, CodeInvalidValue, "a step is either a tool call (tool, arguments) or a parallel group (parallel), not both")
	case haveChildren:
		arr, ok := children.([]any)
		if !ok {
			d.add(path+".parallel", CodeInvalidValue, fmt.Sprintf("parallel must be an array of steps, not %s", jsonTypeOf(children)))
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
		d.add(path, CodeInvalidValue, fmt.Sprintf("retry must be an object like {\"max_attempts\": 3, \"backoff_ms\": 200}, not %s", jsonTypeOf(v)))
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

func (d *decoder) unknown(path, key string, known []string) {
	at := key
	if path != "" {
		at = path + "." + key
	}
	sugg := suggest.Closest(key, known, 2)
	msg := fmt.Sprintf("unknown field %q", key)
	if len(sugg) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", sugg[0])
	} else {
		msg += "; known fields are " + strings.Join(known, ", ")
	}
	d.add(at, CodeUnknownField, msg, sugg...)
}

func (d *decoder) str(v any, path string) string {
	s, ok := v.(string)
	if !ok && v != nil {
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be a string, not %s", lastName(path), jsonTypeOf(v)))
	}
	return s
}

func (d *decoder) posInt(v any, path string) int {
	n, ok := d.integer(v, path)
	if ok && n < 1 {
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be a positive integer, not %d", lastName(path), n))
		return 0
	}
	return n
}

func (d *decoder) nonNegInt(v any, path string) int {
	n, ok := d.integer(v, path)
	if ok && n < 0 {
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must not be negative, not %d", lastName(path), n))
		return 0
	}
	return n
}

// integer decodes an integer in the range of int32. Integral numbers
// written with a fraction or an exponent (3.0, 1e3) are integers too. ok is
// false when v is null or was reported as invalid; each problem is reported
// once.
func (d *decoder) integer(v any, path string) (n int, ok bool) {
	if v == nil {
		return 0, false
	}
	num, isNum := v.(json.Number)
	if !isNum {
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be an integer, not %s", lastName(path), jsonTypeOf(v)))
		return 0, false
	}
	f, err := strconv.ParseFloat(num.String(), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be an integer, not %s", lastName(path), num))
	case f != math.Trunc(f):
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be a whole number, not %s", lastName(path), num))
	case err != nil || f > math.MaxInt32 || f < math.MinInt32:
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s is out of range: %s is beyond %d", lastName(path), num, math.MaxInt32))
	default:
		return int(f), true
	}
	return 0, false
}

// values converts decoded JSON (with json.Number) into plain Go JSON values
// (float64 numbers), reporting numbers out of range.
func (d *decoder) values(v any, path string) any {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(v.String(), 64)
		if err != nil || math.IsInf(f, 0) {
			d.add(path, CodeInvalidValue, fmt.Sprintf("number %s is out of range; send numbers within ±1.8e308", v))
			return nil
		}
		return f
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range sortedKeys(v) { // sorted: issues come in a stable order
			out[k] = d.values(v[k], path+"."+k)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = d.values(e, fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	}
	return v
}

func lastName(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
