package orchestrate

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orchestra-mcp/orchestra/internal/textcut"
)

// Responses: what a caller gets back of the envelope. The execution
// record always keeps the whole envelope.
const (
	// ResponseCompact leaves out the plan echo (except a dry run's, whose
	// normalised plan is its answer), the bindings and the steps' arguments. When the plan's answer or return value came out,
	// it leaves out the steps' outputs too, since they are what the answer
	// or result is made of, and counts the steps that succeeded instead
	// of listing them (artifact.step_counts): steps lists only those that
	// did not, in full.
	ResponseCompact = "compact"
	// ResponseFull is the whole envelope.
	ResponseFull = "full"
)

// structuredContentSince is the first protocol version with a tool
// result's structuredContent; older clients read only text content.
const structuredContentSince = "2025-06-18"

// Full reports whether the envelope goes to its caller whole.
func (e *Envelope) Full() bool { return e.full }

// SetFull sets whether the envelope goes to its caller whole.
func (e *Envelope) SetFull(full bool) { e.full = full }

// The compact view shadows the fields it leaves out with empty ones of the
// same JSON name: encoding/json takes the shallower field, and every other
// field of the artifact and of a step comes through as it is.
type compactEnvelope struct {
	ArtifactID string           `json:"artifact_id"`
	Artifact   *compactArtifact `json:"artifact"`
	Metadata   compactMetadata  `json:"_metadata"`
}

type compactArtifact struct {
	*Artifact
	Plan             *Plan          `json:"plan,omitempty"`
	Bindings         map[string]any `json:"bindings,omitempty"`
	Steps            []*compactStep `json:"steps"`
	StepCounts       map[string]int `json:"step_counts,omitempty"`
	Errors           []*Error       `json:"errors,omitempty"`
	ValidationErrors []*Issue       `json:"validation_errors,omitempty"`
	Warnings         []*Issue       `json:"warnings,omitempty"`
}

type compactStep struct {
	*StepRecord
	Index     *int           `json:"index,omitempty"`
	Path      string         `json:"path,omitempty"`
	ExecID    string         `json:"exec_id,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Output    any            `json:"output,omitempty"`
	Error     *Error         `json:"error,omitempty"`
	Attempts  int            `json:"attempts,omitempty"`
	StartedAt *time.Time     `json:"started_at,omitempty"`
	Children  []*compactStep `json:"children,omitempty"`
}

// compactMetadata leaves out the ids that are empty and the depth, but
// never the standard envelope's tool_name and executed_at.
type compactMetadata struct {
	ToolName   string `json:"tool_name"`
	ExecutedAt string `json:"executed_at"`
	ContextID  string `json:"context_id,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
	UserID     string `json:"user_id,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	ExecID     string `json:"exec_id,omitempty"`
	Record     string `json:"record,omitempty"`
}

// compact returns the compact view of e.
func (e *Envelope) compact() *compactEnvelope {
	a := e.Artifact
	// With an answer or a result, the caller has what it asked for: the
	// steps that succeeded are counted, not listed, and no step brings
	// its output.
	answered := a.Answer != "" || a.Result != nil
	var steps func([]*StepRecord) []*compactStep
	steps = func(rs []*StepRecord) []*compactStep {
		out := make([]*compactStep, 0, len(rs))
		for _, r := range rs {
			c := &compactStep{StepRecord: r, Error: r.Error, Children: steps(r.Children)}
			if len(c.Children) == 0 {
				c.Children = nil
			}
			if answered && r.Status == StatusSuccess && c.Children == nil {
				continue // neither it nor any step under it needs telling
			}
			if !answered && len(r.Children) == 0 {
				c.Output = r.Output
			}
			out = append(out, c)
		}
		return out
	}
	art := &compactArtifact{Artifact: a, Steps: steps(a.Steps), Errors: a.Errors, ValidationErrors: a.ValidationErrors,
		Warnings: settledWarnings(a)}
	if answered {
		art.StepCounts = stepCounts(a.Steps)
	}
	if a.DryRun {
		art.Plan = a.Plan // the normalised plan is what a dry run is for
	}
	m := e.Metadata
	return &compactEnvelope{
		ArtifactID: e.ArtifactID,
		Artifact:   art,
		Metadata: compactMetadata{ToolName: m.ToolName, ExecutedAt: m.ExecutedAt, ContextID: m.ContextID, RequestID: m.RequestID, TraceID: m.TraceID, UserID: m.UserID,
			DurationMS: m.DurationMS, ExecID: m.ExecID, Record: m.Record},
	}
}

// stepCounts counts the tool and agent steps (the leaves: a group or a
// loop is counted by its children, as in the summary) by status.
func stepCounts(rs []*StepRecord) map[string]int {
	counts := map[string]int{}
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, r := range rs {
			if r.Type == "parallel" || r.Type == TypeForEach {
				walk(r.Children)
				if r.SkippedIterations > 0 {
					counts[StatusSkipped] += r.SkippedIterations
				}
				continue
			}
			counts[r.Status]++
		}
	}
	walk(rs)
	return counts
}

// settledWarnings returns the warnings a compact response keeps: all of
// them, except, after a run that succeeded, the unchecked references the
// run has since resolved (every step's, and the answer's or the return
// value's when it came out). The record keeps every warning.
func settledWarnings(a *Artifact) []*Issue {
	if a.Status != StatusSuccess {
		return a.Warnings
	}
	var out []*Issue
	for _, w := range a.Warnings {
		settled := w.Code == CodeUncheckedRef
		switch {
		case w.Path == "plan.answer" || strings.HasPrefix(w.Path, "plan.answer."):
			settled = settled && a.Answer != ""
		case w.Path == "plan.return" || strings.HasPrefix(w.Path, "plan.return.") || strings.HasPrefix(w.Path, "plan.return["):
			settled = settled && a.Result != nil
		}
		if !settled {
			out = append(out, w)
		}
	}
	return out
}

// CompactJSON returns the compact view of the envelope as JSON.
func (e *Envelope) CompactJSON() []byte {
	data, err := json.Marshal(e.compact())
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "the envelope is not encodable as JSON: " + err.Error()})
	}
	return data
}

// maxTextOutput caps the last step's output in the text content.
const maxTextOutput = 2 << 10

// Text returns the text content of the tool's result, for people and
// models: the summary, then the answer, the result or the direct response
// when there is one, and otherwise (compact) the output of the last step
// that has one.
func (e *Envelope) Text() string {
	a := e.Artifact
	var b strings.Builder
	b.WriteString(e.Summary())
	switch {
	case a.Answer != "":
		b.WriteString("\n\n")
		b.WriteString(a.Answer)
	case a.Result != nil:
		data, _ := json.Marshal(a.Result)
		b.WriteString("\n\n")
		b.Write(data)
	case a.Response != "":
		b.WriteString("\n\n")
		b.WriteString(a.Response)
	case !e.full:
		if last := lastOutput(a.Steps); last != nil {
			data, _ := json.Marshal(last.Output)
			b.WriteString("\n\nOutput of " + last.ID + ": ")
			if len(data) > maxTextOutput {
				cut := textcut.Index(data, maxTextOutput)
				data = append(data[:cut:cut], "… (truncated; \"response\": \"full\" has it all)"...)
			}
			b.Write(data)
		}
	}
	return b.String()
}

// lastOutput returns the last tool step, in plan order, that has an output.
func lastOutput(rs []*StepRecord) *StepRecord {
	for i := len(rs) - 1; i >= 0; i-- {
		if c := lastOutput(rs[i].Children); c != nil {
			return c
		}
		if len(rs[i].Children) == 0 && rs[i].Output != nil {
			return rs[i]
		}
	}
	return nil
}

// Result turns an envelope into the tool's result for a client of the
// current protocol; see [ResultFor].
func Result(env *Envelope) *mcp.CallToolResult { return ResultFor(env, "") }

// ResultFor turns an envelope into the tool's result for a client that
// speaks protocol (empty: a current one). The structured content is the
// envelope, whole or compact as its caller asked; isError is set when the
// plan did not succeed. The first text block is [Envelope.Text]. A second
// text block holding exactly the JSON of the structured content is added
// for a full response, and for clients whose protocol predates structured
// content, so that they still get the data and a parser finds a block that
// is pure JSON.
func ResultFor(env *Envelope, protocol string) *mcp.CallToolResult {
	var data []byte
	if env.full {
		data = env.JSON()
	} else {
		data = env.CompactJSON()
	}
	content := []mcp.Content{&mcp.TextContent{Text: env.Text()}}
	if env.full || (protocol != "" && protocol < structuredContentSince) {
		content = append(content, &mcp.TextContent{Text: string(data)})
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: json.RawMessage(data),
		IsError:           !env.Artifact.Success && env.Artifact.Status != StatusAwaitingClient && env.Artifact.Status != StatusRunning,
	}
}
