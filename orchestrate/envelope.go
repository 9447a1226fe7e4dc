package orchestrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Plan and step statuses.
const (
	StatusSuccess   = "success"
	StatusFailed    = "failed"
	StatusPartial   = "partial"
	StatusSkipped   = "skipped"
	StatusCancelled = "cancelled"
	StatusRunning   = "running"
	StatusPending   = "pending"
)

// Failure codes of steps and runs.
const (
	CodeToolError         = "tool_error"
	CodeTimeout           = "timeout"
	CodeDeadlineExceeded  = "deadline_exceeded"
	CodeCancelled         = "cancelled"
	CodePanic             = "panic"
	CodeValidation        = "validation"
	CodeDepthExceeded     = "depth_exceeded"
	CodeServerUnavailable = "server_unavailable"
	CodeTemplateError     = "template_error"
	CodeDependencyFailed  = "dependency_failed"
	CodeHalted            = "halted"
	CodeBusy              = "busy"
	CodePlannerFailed     = "planner_failed"
)

// Envelope is the response of an orchestration: seed 000's artifact
// envelope. It is the structuredContent of agent_orchestrate.
type Envelope struct {
	ArtifactID string    `json:"artifact_id"`
	Artifact   *Artifact `json:"artifact"`
	Metadata   Metadata  `json:"_metadata"`
}

// Artifact is the outcome of one orchestration.
type Artifact struct {
	// Status is success, failed or partial.
	Status  string `json:"status"`
	Success bool   `json:"success"`
	// DryRun is set when the plan was only validated.
	DryRun bool `json:"dry_run,omitempty"`
	// Response is the answer of a direct_response plan, or the written
	// answer of an ask.
	Response string `json:"response,omitempty"`
	// Plan is the normalized plan that ran (or would run).
	Plan *Plan `json:"plan"`
	// Steps lists every step of the plan in plan order, skipped ones too.
	Steps []*StepRecord `json:"steps"`
	// Bindings are the request's bindings and the outputs of steps that
	// have a result_key.
	Bindings map[string]any `json:"bindings"`
	// Errors are the failures of the run and its steps.
	Errors []*Error `json:"errors"`
	// ValidationErrors are plan-time problems; a plan with any ran nothing.
	ValidationErrors []*Issue `json:"validation_errors"`
	// Warnings are what plan-time validation could not check.
	Warnings []*Issue `json:"warnings,omitempty"`
	// Truncated reports that outputs were cut to fit the response limit.
	Truncated bool `json:"truncated,omitempty"`
	// Planner records the model calls of the prompt path.
	Planner *PlannerInfo `json:"planner,omitempty"`
}

// PlannerInfo records what the planner did for a prompt.
type PlannerInfo struct {
	Model        string `json:"model,omitempty"`
	ModelCalls   int    `json:"model_calls"`
	Attempts     int    `json:"attempts"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	LastAnswer   string `json:"last_answer,omitempty"`
	Fallback     string `json:"fallback,omitempty"`
}

// Error is a failure of a run or of one step.
type Error struct {
	StepID  string `json:"step_id,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.StepID != "" {
		return fmt.Sprintf("step %s: %s: %s", e.StepID, e.Code, e.Message)
	}
	return e.Code + ": " + e.Message
}

// StepRecord is what happened to one step.
type StepRecord struct {
	ID        string `json:"id"`
	Index     int    `json:"index"`
	Path      string `json:"path"`
	Type      string `json:"type"` // "tool" or "parallel"
	Tool      string `json:"tool,omitempty"`
	ResultKey string `json:"result_key,omitempty"`
	Merge     string `json:"merge,omitempty"`
	Status    string `json:"status"`
	ExecID    string `json:"exec_id,omitempty"`
	// Arguments are the arguments the tool was called with, templates resolved.
	Arguments map[string]any `json:"arguments,omitempty"`
	Output    any            `json:"output"`
	// Content holds the non-text content the tool returned (images, audio,
	// resources); it is never inlined into templates.
	Content    []mcp.Content `json:"content,omitempty"`
	Error      *Error        `json:"error"`
	Attempts   int           `json:"attempts"`
	StartedAt  *time.Time    `json:"started_at,omitempty"`
	DurationMS int64         `json:"duration_ms"`
	// SkillID is the skill of a downstream artifact envelope.
	SkillID  string        `json:"skill_id,omitempty"`
	Children []*StepRecord `json:"children,omitempty"`

	step *Step
}

// Metadata is the _metadata of the envelope.
type Metadata struct {
	ContextID  string `json:"context_id"`
	RequestID  string `json:"request_id"`
	TraceID    string `json:"trace_id"`
	UserID     string `json:"user_id"`
	ToolName   string `json:"tool_name"`
	ExecutedAt string `json:"executed_at"`
	DurationMS int64  `json:"duration_ms"`
	Depth      int    `json:"depth"`
	// ExecID names the execution record of this run.
	ExecID string `json:"exec_id,omitempty"`
	// Record is where the execution record can be read, when it is kept.
	Record string `json:"record,omitempty"`
}

// Summary returns a short human-readable account of the run.
func (e *Envelope) Summary() string {
	a := e.Artifact
	var b strings.Builder
	leaves := 0
	counts := map[string]int{}
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, r := range rs {
			if r.Type == "parallel" {
				walk(r.Children)
				continue
			}
			leaves++
			counts[r.Status]++
		}
	}
	walk(a.Steps)
	switch {
	case a.DryRun && a.Success:
		fmt.Fprintf(&b, "Dry run: the plan is valid (%d tool steps); nothing ran.", leaves)
	case len(a.ValidationErrors) > 0:
		fmt.Fprintf(&b, "The plan is invalid (%d problems); nothing ran.", len(a.ValidationErrors))
	case a.Response != "" && leaves == 0:
		b.WriteString("Direct response; no tools ran.")
	default:
		fmt.Fprintf(&b, "Plan %s: %d of %d tool steps succeeded", a.Status, counts[StatusSuccess], leaves)
		var rest []string
		for _, st := range []string{StatusFailed, StatusCancelled, StatusSkipped} {
			if counts[st] > 0 {
				rest = append(rest, fmt.Sprintf("%d %s", counts[st], st))
			}
		}
		if len(rest) > 0 {
			b.WriteString(" (" + strings.Join(rest, ", ") + ")")
		}
		fmt.Fprintf(&b, " in %d ms.", e.Metadata.DurationMS)
	}
	for i, err := range a.ValidationErrors {
		if i == 5 {
			fmt.Fprintf(&b, "\n- ... and %d more", len(a.ValidationErrors)-5)
			break
		}
		fmt.Fprintf(&b, "\n- %s [%s]", err.Error(), err.Code)
	}
	for i, err := range a.Errors {
		if i == 5 {
			fmt.Fprintf(&b, "\n- ... and %d more", len(a.Errors)-5)
			break
		}
		fmt.Fprintf(&b, "\n- %s", err.Error())
	}
	return b.String()
}

// Text returns the text content of the response: the summary, then the
// envelope as JSON.
//
// The JSON is compact: the text is read by models, for whom indentation is
// tokens that say nothing, and it keeps the response small.
func (e *Envelope) Text() string { return e.text(e.JSON()) }

// text is the text content around data, the envelope's JSON.
func (e *Envelope) text(data []byte) string { return e.Summary() + "\n\n" + string(data) }

// JSON returns the envelope encoded as JSON. An envelope that does not
// encode (a tool's output no JSON can hold) becomes an object saying why.
func (e *Envelope) JSON() []byte {
	data, err := json.Marshal(e)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "the envelope is not encodable as JSON: " + err.Error()})
	}
	return data
}

// skillID extracts the skill id of a downstream artifact envelope (seed 000's
// ToolResponse): top-level skill_id first, then the artifact's, then _metadata's.
func skillID(output any) string {
	m, ok := output.(map[string]any)
	if !ok {
		return ""
	}
	if s, ok := m["skill_id"].(string); ok && s != "" {
		return s
	}
	if !isArtifactEnvelope(m) {
		return ""
	}
	if art, ok := m["artifact"].(map[string]any); ok {
		if s, ok := art["skill_id"].(string); ok && s != "" {
			return s
		}
	}
	if md, ok := m["_metadata"].(map[string]any); ok {
		if s, ok := md["skill_id"].(string); ok {
			return s
		}
	}
	return ""
}

// isArtifactEnvelope reports whether m has the artifact envelope's shape.
func isArtifactEnvelope(m map[string]any) bool {
	_, a := m["artifact_id"]
	_, b := m["artifact"]
	_, c := m["_metadata"]
	return a && b && c
}

// truncationMarker replaces v, size bytes as JSON, when it is too large
// for the response. Only the preview is encoded.
func truncationMarker(v any, size, limit int) map[string]any {
	preview := previewJSON(v, min(limit/2, 1024))
	return map[string]any{
		"_truncated": true,
		"bytes":      size,
		"preview":    strings.ToValidUTF8(string(preview), "") + "…",
		"message":    fmt.Sprintf("a value of %d bytes was truncated to fit the response; read the full record or narrow the output with json_query", size),
	}
}

// capOutputs replaces outputs larger than the per-step limit with markers,
// then the largest ones until the response fits its limit. The resolved
// arguments of steps and the bindings (which repeat the outputs of steps
// with a result_key) count as outputs: each of them could carry a large
// value into the response.
func capOutputs(a *Artifact, perStep, total int) {
	var all []capSlot
	add := func(sl capSlot) {
		v := sl.get(a)
		if v == nil {
			return
		}
		size, ok := jsonSize(v)
		if !ok {
			return // json.Marshal fails on it
		}
		if size > perStep {
			sl.set(a, truncationMarker(v, size, perStep))
			a.Truncated = true
			size, _ = jsonSize(sl.get(a))
		}
		sl.size = size
		all = append(all, sl)
	}
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, r := range rs {
			add(capSlot{rec: r, kind: capOutput})
			if r.Arguments != nil {
				add(capSlot{rec: r, kind: capArguments})
			}
			walk(r.Children)
		}
	}
	walk(a.Steps)
	for _, k := range slices.Sorted(maps.Keys(a.Bindings)) {
		add(capSlot{kind: capBinding, key: k})
	}
	size := 0
	for _, s := range all {
		size += s.size
	}
	if size <= total {
		return
	}
	slices.SortStableFunc(all, func(x, y capSlot) int { return y.size - x.size })
	for _, s := range all {
		if size <= total {
			break
		}
		marker := truncationMarker(s.get(a), s.size, 256)
		small, _ := json.Marshal(marker)
		if len(small) >= s.size {
			continue // a marker would not make the response smaller
		}
		s.set(a, marker)
		size -= s.size - len(small)
		a.Truncated = true
	}
}

// capSlot is one value of the envelope that capOutputs may replace: a
// step's output or arguments, or a binding.
type capSlot struct {
	rec  *StepRecord
	kind int
	key  string
	size int
}

const (
	capOutput = iota
	capArguments
	capBinding
)

func (s capSlot) get(a *Artifact) any {
	switch s.kind {
	case capOutput:
		return s.rec.Output
	case capArguments:
		if s.rec.Arguments == nil {
			return nil
		}
		return s.rec.Arguments
	}
	return a.Bindings[s.key]
}

func (s capSlot) set(a *Artifact, m map[string]any) {
	switch s.kind {
	case capOutput:
		s.rec.Output = m
	case capArguments:
		s.rec.Arguments = m
	default:
		a.Bindings[s.key] = m
	}
}

// jsonSize returns len(json.Marshal(v)) without building the encoding for
// the types decoded JSON is made of, and ok=false where json.Marshal fails.
func jsonSize(v any) (n int, ok bool) {
	switch v := v.(type) {
	case nil:
		return 4, true
	case bool:
		if v {
			return 4, true
		}
		return 5, true
	case string:
		return jsonStringSize(v), true
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return 0, false
		}
		var buf [32]byte
		return len(appendJSONFloat(buf[:0], v)), true
	case map[string]any, []any:
		return jsonSizeWithin(v, math.MaxInt)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return 0, false
	}
	return len(data), true
}

// appendJSONFloat formats f the way encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// jsonStringSize is the length of s encoded by encoding/json, which escapes
// HTML characters and replaces invalid UTF-8.
func jsonStringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
