package orchestrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/plural"
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

// Envelope is the response of an orchestration, the artifact envelope
// (artifact_id, artifact, _metadata). It is the structuredContent of
// agent_orchestrate.
type Envelope struct {
	ArtifactID string    `json:"artifact_id"`
	Artifact   *Artifact `json:"artifact"`
	Metadata   Metadata  `json:"_metadata"`

	// full says the caller asked for the whole envelope (response "full");
	// otherwise it gets the compact view (compact.go).
	full bool
}

// Artifact is the outcome of one orchestration.
type Artifact struct {
	// Status is success, failed, partial or cancelled (the caller or the
	// server stopped the run); running for a background run that goes on,
	// awaiting_client for a paused one.
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
	// Answer is the plan's answer, rendered after the run.
	Answer string `json:"answer,omitempty"`
	// Result is the plan's return value, resolved after the run.
	Result any `json:"result,omitempty"`
	// Agents sums the model calls and tokens of the run's agent steps.
	Agents *AgentUsage `json:"agents,omitempty"`
	// Pending lists the calls a paused run (status awaiting_client) waits
	// for the client to make.
	Pending []*PendingCall `json:"pending,omitempty"`
	// Resume says how to continue a paused run.
	Resume *ResumeHint `json:"resume,omitempty"`
	// Background is the progress of a run that goes on without its
	// caller (status running), and how to await it.
	Background *BackgroundInfo `json:"background,omitempty"`
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
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.StepID != "" {
		return fmt.Sprintf("step %s: %s: %s", e.StepID, e.Code, e.Message)
	}
	return string(e.Code) + ": " + e.Message
}

// StepRecord is what happened to one step.
type StepRecord struct {
	ID        string `json:"id"`
	Index     int    `json:"index"`
	Path      string `json:"path"`
	Type      string `json:"type"` // "tool", "agent", "parallel", "for_each", or "model" (a model call of an agent's run)
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
	SkillID string `json:"skill_id,omitempty"`
	// Iteration is the index of the element an iteration of a loop ran
	// for; the iterations that started are the children of the loop's
	// record, in element order.
	Iteration *int `json:"iteration,omitempty"`
	// SkippedIterations counts, on a loop's record, the iterations that
	// did not run: a condition skipped them, or the loop stopped before
	// them. They have no record of their own (a skipped iteration costs
	// what deciding to skip it did); their places in the output are null.
	SkippedIterations int `json:"skipped_iterations,omitempty"`
	// Reason says why a skipped step did not run when that is no failure:
	// its condition (when) was false, or that of a step it needs.
	Reason   *Error        `json:"reason,omitempty"`
	Children []*StepRecord `json:"children,omitempty"`

	step  *Step
	ended bool // the step ended: the record is final
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
	counts := stepCounts(a.Steps)
	leaves := 0
	for _, n := range counts {
		leaves += n
	}
	switch {
	case a.DryRun && a.Success:
		fmt.Fprintf(&b, "Dry run: the plan is valid (%s); nothing ran.", plural.Count(leaves, "tool step"))
	case len(a.ValidationErrors) > 0:
		fmt.Fprintf(&b, "The plan is invalid (%s); nothing ran.", plural.Count(len(a.ValidationErrors), "problem"))
	case a.Response != "" && leaves == 0:
		b.WriteString("Direct response; no tools ran.")
	case a.Status == StatusAwaitingClient:
		b.WriteString(pausedSummary(a, counts[StatusSuccess], leaves))
	case a.Status == StatusRunning && a.Background != nil:
		bg := a.Background
		fmt.Fprintf(&b, "Running in the background as %s: %d of %d tool steps ended so far. Await it: {\"await\": {\"exec_id\": %q}}.", bg.ExecID, bg.StepsEnded, bg.Steps, bg.ExecID)
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

// JSON returns the envelope encoded as JSON. An envelope that does not
// encode (a tool's output no JSON can hold) becomes an object saying why.
func (e *Envelope) JSON() []byte {
	data, err := json.Marshal(e)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "the envelope is not encodable as JSON: " + err.Error()})
	}
	return data
}

// skillID extracts the skill id of a downstream tool's response when it is
// an artifact envelope: top-level skill_id first, then the artifact's, then
// _metadata's.
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

// snapshot is what a finished run's envelope is made of, taken once under
// the run's lock after every step ended: nothing writes to it, or to the
// records it holds, any more.
type snapshot struct {
	plan      *Plan
	oversized bool // the plan is too large to echo
	steps     []*StepRecord
	bindings  map[string]any // the request's
	results   map[string]any // the outputs of steps with a result_key
	errors    []*Error
	valid     *Validation
	planner   *PlannerInfo
	completed bool // the state machine ended in completed
	dryRun    bool
	full      bool   // response "full"
	answer    string // the plan's answer, rendered
	result    any    // the plan's return value, resolved
	lim       Limits
	meta      Metadata
}

// cancelled reports whether the run stopped because its caller cancelled
// it (or the server stopped it): its own errors say so.
func (s *snapshot) cancelled() bool {
	for _, e := range s.errors {
		if e.Code == CodeCancelled {
			return true
		}
	}
	return false
}

// envelope assembles the response of a run.
func (s *snapshot) envelope() *Envelope {
	a := &Artifact{Plan: s.plan, Steps: []*StepRecord{}, Errors: []*Error{}, ValidationErrors: []*Issue{}, Planner: s.planner}
	if s.oversized {
		a.Plan = nil
	}
	a.Bindings = make(map[string]any, len(s.bindings)+len(s.results))
	maps.Copy(a.Bindings, s.bindings)
	maps.Copy(a.Bindings, s.results)
	if s.valid != nil {
		a.ValidationErrors = s.valid.Errors
		if len(s.valid.Warnings) > 0 {
			a.Warnings = s.valid.Warnings
		}
	}
	a.Steps = append(a.Steps, s.steps...)
	a.Agents = agentUsage(a.Steps)
	if s.plan != nil && s.plan.Type == "direct_response" {
		a.Response = s.plan.Content
	}
	// The errors of tool steps and of skipped steps, except the losers a
	// won first_success race cancelled: cancelling them is the strategy
	// working, not a failure.
	var stepErrs []*Error
	var walk func(rs []*StepRecord, wonRace bool)
	walk = func(rs []*StepRecord, wonRace bool) {
		for _, rec := range rs {
			// A loop's error is its own only when no iteration ran.
			own := rec.Type == "tool" || rec.Type == "agent" || rec.Type == TypeForEach && len(rec.Children) == 0
			if rec.Error != nil && (own || rec.Status == StatusSkipped) && !(wonRace && rec.Status == StatusCancelled) {
				stepErrs = append(stepErrs, rec.Error)
			}
			walk(rec.Children, rec.Merge == MergeFirstSuccess && rec.Status == StatusSuccess)
		}
	}
	walk(a.Steps, false)
	// A group's status sums up its children, so the plan's status follows
	// from the top-level steps.
	anyFailed := false
	for _, rec := range a.Steps {
		if rec.Status == StatusFailed || rec.Status == StatusPartial || rec.Status == StatusCancelled || (rec.Status == StatusSkipped && rec.Error != nil) {
			anyFailed = true
		}
	}
	a.Errors = append(append(a.Errors, stepErrs...), s.errors...)
	a.DryRun = s.dryRun
	switch {
	case len(a.ValidationErrors) > 0:
		a.Status = StatusFailed
	case s.cancelled():
		a.Status = StatusCancelled
	case !s.completed:
		a.Status = StatusFailed
	case anyFailed:
		a.Status = StatusPartial
	default:
		a.Status = StatusSuccess
	}
	a.Success = a.Status == StatusSuccess
	a.Answer, a.Result = s.answer, s.result
	capOutputs(a, s.lim.MaxStepOutputBytes, s.lim.MaxResponseBytes)
	return &Envelope{ArtifactID: s.meta.ExecID, Artifact: a, Metadata: s.meta, full: s.full}
}
