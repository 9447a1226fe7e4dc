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

	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// DecodeRequest decodes the input of agent_orchestrate, or a bare plan, and
// normalizes it. It reports the problems it finds, each with its path (the
// first MaxIssues, then a count of the rest); a request with issues must
// not run. The JSON passes the decoding gate with its default limits
// (jsongate.Default) first.
//
// Accepted plan shapes: {"steps": [...]}, the planner format
// {"type": "tool_calls", "calls": [{"tool_name", "arguments"}]} and
// {"type": "direct_response", "content": "..."}, and the aliases of agent
// plans (result_key, merge_strategy, agent_id/action_id/prompt/with).
func DecodeRequest(data []byte) (*Request, []*Issue) {
	return decodeRequest(data, true, jsongate.Default(0))
}

// decodeInput decodes the input of agent_orchestrate as its input schema
// says: a bare plan ({"steps": [...]} at the top) is refused with a hint
// to wrap it in "plan".
func decodeInput(data []byte, gate jsongate.Limits) (*Request, []*Issue) {
	return decodeRequest(data, false, gate)
}

func decodeRequest(data []byte, bare bool, gate jsongate.Limits) (*Request, []*Issue) {
	v, issue := decodeJSON(data, gate)
	if issue != nil {
		return nil, []*Issue{issue}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []*Issue{{Code: CodeInvalidRequest, Message: fmt.Sprintf("the input is %s; send a JSON object: {\"plan\": {\"steps\": [...]}} or {\"prompt\": \"...\"}", schemas.TypePhrase(v))}}
	}
	d := &decoder{bare: bare, gate: gate}
	req := d.request(obj)
	if len(d.issues) > 0 {
		return nil, d.result()
	}
	return req, nil
}

// DecodePlan decodes and normalizes a plan on its own, as DecodeRequest
// does a request.
func DecodePlan(data []byte) (*Plan, []*Issue) {
	gate := jsongate.Default(0)
	v, issue := decodeJSON(data, gate)
	if issue != nil {
		return nil, []*Issue{issue}
	}
	d := &decoder{gate: gate}
	p := d.plan(v, "plan")
	if len(d.issues) > 0 {
		return nil, d.result()
	}
	return p, nil
}

// decodeJSON decodes one JSON value, with numbers checked for range, once
// it has passed the decoding gate.
func decodeJSON(data []byte, gate jsongate.Limits) (any, *Issue) {
	if err := gate.Check(data); err != nil {
		return nil, gateIssue(err)
	}
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

// RequestGateKeys name the settings of the decoding gate's limits on a
// request, for messages.
func RequestGateKeys() jsongate.Keys {
	return jsongate.Keys{Bytes: "server.max_request_bytes", Depth: "server.max_request_depth", Elements: "server.max_request_elements"}
}

// gateIssue describes JSON the decoding gate refused.
func gateIssue(err error) *Issue {
	return &Issue{Code: CodeTooLarge, Message: jsongate.Describe("the input", err, RequestGateKeys())}
}

type decoder struct {
	issues []*Issue
	more   int  // issues past MaxIssues, counted and not kept
	bare   bool // a request may be a bare plan
	gate   jsongate.Limits
}

func (d *decoder) add(path string, code Code, msg string, suggestions ...string) {
	if len(d.issues) >= MaxIssues {
		d.more++
		return
	}
	d.issues = append(d.issues, &Issue{Path: path, Code: code, Message: msg, Suggestions: suggestions})
}

// result returns the issues, ending with a count of those not kept.
func (d *decoder) result() []*Issue {
	if d.more == 0 {
		return d.issues
	}
	return append(d.issues, &Issue{Code: CodeTooManyIssues, Message: fmt.Sprintf("%d more errors are not listed; fix these and send the request again", d.more)})
}

var requestFields = []string{"plan", "prompt", "bindings", "timeout_ms", "max_parallel", "dry_run", "fallback", "response", "context", "client_tools", "resume", "background", "await", "cancel"}

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
				// Models sometimes send the plan as a JSON string: it
				// passes the same gate as the request.
				inner, issue := decodeJSON([]byte(s), d.gate)
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
				d.add("bindings", CodeInvalidValue, fmt.Sprintf("bindings must be an object of named values, not %s", schemas.TypePhrase(v)))
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
				d.add("dry_run", CodeInvalidValue, fmt.Sprintf("dry_run must be true or false, not %s", schemas.TypePhrase(v)))
			}
			req.DryRun = b
		case "fallback":
			req.Fallback = d.str(v, "fallback")
			if req.Fallback != "" && req.Fallback != "reactive" && req.Fallback != "none" {
				d.add("fallback", CodeInvalidValue, fmt.Sprintf("fallback must be \"reactive\" or \"none\", not %q", req.Fallback))
			}
		case "response":
			req.Response = d.str(v, "response")
			if req.Response != "" && req.Response != ResponseCompact && req.Response != ResponseFull {
				d.add("response", CodeInvalidValue, fmt.Sprintf("response must be %q or %q, not %q", ResponseCompact, ResponseFull, req.Response))
			}
		case "context":
			req.Context = d.callerContext(v, "context")
		case "client_tools":
			req.ClientTools = d.clientTools(v, k)
		case "resume":
			req.Resume = d.resume(v, k)
		case "background":
			b, ok := v.(bool)
			if !ok {
				d.add("background", CodeInvalidValue, fmt.Sprintf("background must be true or false, not %s", schemas.TypePhrase(v)))
			}
			req.Background = b
		case "await":
			req.Await = d.await(v, k)
		case "cancel":
			req.Cancel = d.cancel(v, k)
		default:
			d.unknown("", k, requestFields)
		}
	}
	if req.Await != nil || req.Cancel != nil {
		d.control(obj, req)
		return req
	}
	switch {
	case req.Background && req.DryRun:
		d.add("background", CodeInvalidRequest, "a dry run only validates and answers at once; send it without background")
	}
	switch {
	case req.Resume != nil && (req.Plan != nil || req.Prompt != ""):
		d.add("resume", CodeInvalidRequest, "resume continues a run with its own plan; send it without plan or prompt")
	case req.Resume != nil:
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

var planFields = []string{"steps", "schedule", "type", "reasoning", "calls", "content", "answer", "return"}

func (d *decoder) plan(v any, path string) *Plan {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf("a plan must be an object like {\"steps\": [...]}, not %s", schemas.TypePhrase(v)))
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
				d.add(at, CodeInvalidValue, "a plan has either steps or calls (the planner format's name for steps), not both")
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
		case "answer":
			p.Answer = d.str(val, at)
		case "return":
			p.Return = d.values(val, at)
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
		d.add(path+".steps", CodeInvalidValue, fmt.Sprintf("steps must be an array, not %s", schemas.TypePhrase(steps)))
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
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be a string, not %s", lastName(path), schemas.TypePhrase(v)))
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
		d.add(path, CodeInvalidValue, fmt.Sprintf("%s must be an integer, not %s", lastName(path), schemas.TypePhrase(v)))
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
