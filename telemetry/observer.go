package telemetry

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Attribute keys of orchestra's spans and metrics.
const (
	AttrExecID     = attribute.Key("orchestra.exec_id")
	AttrRequestID  = attribute.Key("orchestra.request_id")
	AttrSource     = attribute.Key("orchestra.source")
	AttrDepth      = attribute.Key("orchestra.depth")
	AttrLeaves     = attribute.Key("orchestra.steps")
	AttrStatus     = attribute.Key("orchestra.status")
	AttrStepID     = attribute.Key("orchestra.step.id")
	AttrStepPath   = attribute.Key("orchestra.step.path")
	AttrStepType   = attribute.Key("orchestra.step.type")
	AttrStepExecID = attribute.Key("orchestra.step.exec_id")
	AttrAttempts   = attribute.Key("orchestra.step.attempts")
	AttrIteration  = attribute.Key("orchestra.step.iteration")
	AttrErrorCode  = attribute.Key("orchestra.error.code")
	AttrTool       = attribute.Key("gen_ai.tool.name")
	AttrServer     = attribute.Key("orchestra.server")
	AttrMCPMethod  = attribute.Key("mcp.method.name")
	AttrModel      = attribute.Key("gen_ai.request.model")
)

// runSpans are the open spans of one run.
type runSpans struct {
	ctx     context.Context // carries the run's span
	span    trace.Span
	planner trace.Span
	steps   map[string]trace.Span // the open spans of steps, by step path
}

// Hooks returns the engine hooks that make the spans and metrics of runs.
// Give them to the engine together with [Telemetry.StepContext].
func (t *Telemetry) Hooks() *orchestrate.Hooks {
	progress := t.stepProgress
	if !t.enabled {
		progress = nil // progress is a span event: without traces nothing reads it
	}
	return &orchestrate.Hooks{
		RunStarted:   t.runStarted,
		PlanReady:    t.planReady,
		StepStarted:  t.stepStarted,
		StepProgress: progress,
		StepEnded:    t.stepEnded,
		RunFinished:  t.runFinished,
		// A pause ends the run's span (status awaiting_client); a resume
		// starts one for the run's next part.
		RunPaused: func(i orchestrate.RunPausedInfo) {
			t.runFinished(orchestrate.RunFinishedInfo{Run: i.Run, At: i.At, Envelope: i.Envelope})
		},
		RunResumed: func(i orchestrate.RunResumedInfo) {
			t.runStarted(orchestrate.RunStartedInfo{Run: i.Run, At: i.At})
		},
	}
}

// spans returns the spans of run info; nil if its start was not seen.
func (t *Telemetry) spans(info *orchestrate.RunInfo) *runSpans {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs[info]
}

func (t *Telemetry) runStarted(i orchestrate.RunStartedInfo) {
	info := i.Run
	ctx := ContextWithTraceparent(context.Background(), info.Traceparent)
	start := info.StartedAt
	if start.IsZero() {
		start = i.At
	}
	ctx, sp := t.tracer.Start(ctx, "orchestrate", trace.WithTimestamp(start), trace.WithAttributes(
		AttrExecID.String(info.ExecID),
		AttrRequestID.String(info.IDs.RequestID),
		AttrSource.String(info.Source),
		AttrDepth.Int(info.Depth),
	))
	rs := &runSpans{ctx: ctx, span: sp, steps: map[string]trace.Span{}}
	if i.Planning {
		// The planner's span lasts until the plan is ready or the run ends.
		_, rs.planner = t.tracer.Start(ctx, "plan", trace.WithTimestamp(i.At))
	}
	t.mu.Lock()
	t.runs[info] = rs
	t.mu.Unlock()
}

func (t *Telemetry) planReady(i orchestrate.PlanReadyInfo) {
	rs := t.spans(i.Run)
	if rs == nil {
		return
	}
	t.mu.Lock()
	sp := rs.planner
	rs.planner = nil
	t.mu.Unlock()
	if sp != nil {
		sp.End(trace.WithTimestamp(i.At))
	}
}

// parentPath is the path of the group or loop a step belongs to, or "".
func parentPath(path string) string {
	if i := max(strings.LastIndex(path, ".parallel["), strings.LastIndex(path, ".do[")); i >= 0 {
		return path[:i]
	}
	return ""
}

func (t *Telemetry) stepStarted(i orchestrate.StepStartedInfo) {
	rs, rec := t.spans(i.Run), i.Step
	if rs == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := rs.steps[rec.Path]; ok {
		return
	}
	parent := rs.ctx
	if g, ok := rs.steps[parentPath(rec.Path)]; ok {
		parent = trace.ContextWithSpan(rs.ctx, g)
	}
	start := i.At
	if rec.StartedAt != nil {
		start = *rec.StartedAt
	}
	attrs := []attribute.KeyValue{
		AttrStepID.String(rec.ID), AttrStepPath.String(rec.Path), AttrStepType.String(rec.Type),
		AttrStepExecID.String(rec.ExecID),
	}
	if rec.Tool != "" {
		attrs = append(attrs, AttrTool.String(rec.Tool))
	}
	if rec.Iteration != nil {
		attrs = append(attrs, AttrIteration.Int(*rec.Iteration))
	}
	_, sp := t.tracer.Start(parent, "step "+rec.ID, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	rs.steps[rec.Path] = sp
}

func (t *Telemetry) stepProgress(i orchestrate.StepProgressInfo) {
	rs := t.spans(i.Run)
	if rs == nil {
		return
	}
	t.mu.Lock()
	sp := rs.steps[i.Step.Path]
	t.mu.Unlock()
	if sp != nil {
		sp.AddEvent("progress", trace.WithAttributes(
			attribute.Float64("progress", i.Progress.Progress), attribute.Float64("total", i.Progress.Total)))
	}
}

// stepEnded counts every step that ended, skipped ones too, and ends the
// span of one that started.
func (t *Telemetry) stepEnded(i orchestrate.StepEndedInfo) {
	rec := i.Step
	ctx := context.Background()
	attrs := []attribute.KeyValue{AttrStatus.String(rec.Status), AttrStepType.String(rec.Type)}
	if rec.Tool != "" {
		attrs = append(attrs, AttrTool.String(t.toolLabel(rec.Tool)))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	t.steps.Add(ctx, 1, set)
	if rec.StartedAt != nil {
		t.stepDuration.Record(ctx, float64(rec.DurationMS)/1000, set)
	}

	rs := t.spans(i.Run)
	if rs == nil {
		return
	}
	t.mu.Lock()
	sp, ok := rs.steps[rec.Path]
	delete(rs.steps, rec.Path)
	t.mu.Unlock()
	if !ok {
		return
	}
	sp.SetAttributes(AttrStatus.String(rec.Status), AttrAttempts.Int(rec.Attempts))
	if rec.Error != nil {
		sp.SetAttributes(AttrErrorCode.String(string(rec.Error.Code)))
	}
	if rec.Status != orchestrate.StatusSuccess && rec.Status != orchestrate.StatusSkipped {
		msg := rec.Status
		if rec.Error != nil {
			msg = string(rec.Error.Code) + ": " + rec.Error.Message
		}
		sp.SetStatus(codes.Error, msg)
	}
	end := i.At
	if rec.StartedAt != nil && rec.DurationMS > 0 {
		end = rec.StartedAt.Add(time.Duration(rec.DurationMS) * time.Millisecond)
	}
	sp.End(trace.WithTimestamp(end))
}

// runFinished ends the run's span (and the planner's, when the run ended
// without a plan) and counts the run.
func (t *Telemetry) runFinished(i orchestrate.RunFinishedInfo) {
	info, env, at := i.Run, i.Envelope, i.At
	t.mu.Lock()
	rs := t.runs[info]
	delete(t.runs, info)
	t.mu.Unlock()
	ctx := context.Background()
	status, msg := orchestrate.StatusFailed, orchestrate.StatusFailed
	if env != nil && env.Artifact != nil {
		a := env.Artifact
		status, msg = a.Status, a.Status
		if len(a.Errors) > 0 {
			msg = string(a.Errors[0].Code) + ": " + a.Errors[0].Message
		} else if len(a.ValidationErrors) > 0 {
			msg = "validation: " + a.ValidationErrors[0].Message
		}
		for _, e := range a.Errors {
			if e.Code == orchestrate.CodeDepthExceeded {
				t.depthRejections.Add(ctx, 1)
				break
			}
		}
		if p := a.Planner; p != nil && p.Attempts > 0 {
			t.plannerAttempts.Add(ctx, int64(p.Attempts), metric.WithAttributes(AttrModel.String(p.Model)))
		}
		if rs != nil {
			rs.span.SetAttributes(AttrLeaves.Int(info.Steps()), AttrStatus.String(status))
			if p := a.Planner; p != nil && p.Model != "" {
				rs.span.SetAttributes(AttrModel.String(p.Model))
			}
		}
	}
	if rs != nil {
		if rs.planner != nil {
			rs.planner.SetStatus(codes.Error, msg)
			rs.planner.End(trace.WithTimestamp(at))
		}
		if status != orchestrate.StatusSuccess {
			rs.span.SetStatus(codes.Error, msg)
		}
		rs.span.End(trace.WithTimestamp(at))
	}
	t.orchestrations.Add(ctx, 1, metric.WithAttributes(AttrStatus.String(status), AttrSource.String(info.Source)))
	t.planDuration.Record(ctx, at.Sub(info.StartedAt).Seconds(), metric.WithAttributes(AttrStatus.String(status)))
}

// StepContext returns the context a step's tool is called with: the step's
// span is its current span, and its traceparent is the one sent to
// downstream servers. Give it to the engine as Options.StepContext.
func (t *Telemetry) StepContext(ctx context.Context, info *orchestrate.RunInfo, rec *orchestrate.StepRecord) context.Context {
	t.mu.Lock()
	var sp trace.Span
	if rs := t.runs[info]; rs != nil {
		sp = rs.steps[rec.Path]
	}
	t.mu.Unlock()
	if sp == nil {
		return ctx
	}
	ctx = trace.ContextWithSpan(ctx, sp)
	if tp := Traceparent(ctx); tp != "" {
		ctx = toolcontext.WithTraceparent(ctx, tp)
	}
	return ctx
}
