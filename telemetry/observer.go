package telemetry

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchestra-mcp/orchestra/fsm"
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
	steps   map[string]trace.Span // by step path
	ended   map[string]bool
}

// Observer returns the engine observer that makes the spans and metrics of
// runs. Add it to the engine's options together with [Telemetry.StepContext].
func (t *Telemetry) Observer() orchestrate.Observer { return t.observe }

func (t *Telemetry) observe(ev orchestrate.Event) {
	info := ev.Run
	if info == nil {
		return
	}
	t.mu.Lock()
	rs := t.runs[info]
	if rs == nil {
		rs = t.startRun(info, ev.Transition.At)
		t.runs[info] = rs
	}
	if ev.Transition.Event == orchestrate.EventFinal {
		delete(t.runs, info)
	}
	t.mu.Unlock()

	tr := ev.Transition
	// The planner's span covers planner_active.
	if tr.Event == fsm.EventStartPlan {
		_, sp := t.tracer.Start(rs.ctx, "plan", trace.WithTimestamp(tr.At))
		t.mu.Lock()
		rs.planner = sp
		t.mu.Unlock()
	} else if tr.From == fsm.StatePlannerActive && tr.To != fsm.StatePlannerActive {
		t.mu.Lock()
		sp := rs.planner
		rs.planner = nil
		t.mu.Unlock()
		if sp != nil {
			if tr.To == fsm.StateFailed {
				sp.SetStatus(codes.Error, tr.Event)
			}
			sp.End(trace.WithTimestamp(tr.At))
		}
	}

	switch {
	case tr.Event == orchestrate.EventFinal:
		t.finishRun(info, rs, ev.Envelope, tr.At)
	case tr.Event == orchestrate.EventProgress:
		if ev.Step != nil && ev.Progress != nil {
			if sp := rs.stepSpan(t, ev.Step.Path); sp != nil {
				sp.AddEvent("progress", trace.WithAttributes(
					attribute.Float64("progress", ev.Progress.Progress), attribute.Float64("total", ev.Progress.Total)))
			}
		}
	case tr.Event == fsm.EventStepStarted && ev.Step != nil:
		t.startStep(rs, ev.Step)
	case ev.Step != nil && ended(ev.Step.Status):
		t.endStep(rs, ev.Step, tr.At)
	}
}

func (rs *runSpans) stepSpan(t *Telemetry, path string) trace.Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	return rs.steps[path]
}

// ended reports whether a step status is final.
func ended(status string) bool {
	return status != orchestrate.StatusRunning && status != orchestrate.StatusPending && status != ""
}

func (t *Telemetry) startRun(info *orchestrate.RunInfo, at time.Time) *runSpans {
	ctx := ContextWithTraceparent(context.Background(), info.Traceparent)
	start := info.StartedAt
	if start.IsZero() {
		start = at
	}
	ctx, sp := t.tracer.Start(ctx, "orchestrate", trace.WithTimestamp(start), trace.WithAttributes(
		AttrExecID.String(info.ExecID),
		AttrRequestID.String(info.IDs.RequestID),
		AttrSource.String(info.Source),
		AttrDepth.Int(info.Depth),
	))
	return &runSpans{ctx: ctx, span: sp, steps: map[string]trace.Span{}, ended: map[string]bool{}}
}

// parentPath is the path of the group a step belongs to, or "".
func parentPath(path string) string {
	if i := strings.LastIndex(path, ".parallel["); i >= 0 {
		return path[:i]
	}
	return ""
}

func (t *Telemetry) startStep(rs *runSpans, rec *orchestrate.StepRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := rs.steps[rec.Path]; ok {
		return
	}
	parent := rs.ctx
	if g, ok := rs.steps[parentPath(rec.Path)]; ok {
		parent = trace.ContextWithSpan(rs.ctx, g)
	}
	start := time.Now()
	if rec.StartedAt != nil {
		start = *rec.StartedAt
	}
	name := "step " + rec.ID
	attrs := []attribute.KeyValue{
		AttrStepID.String(rec.ID), AttrStepPath.String(rec.Path), AttrStepType.String(rec.Type),
		AttrStepExecID.String(rec.ExecID),
	}
	if rec.Tool != "" {
		attrs = append(attrs, AttrTool.String(rec.Tool))
	}
	_, sp := t.tracer.Start(parent, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	rs.steps[rec.Path] = sp
}

func (t *Telemetry) endStep(rs *runSpans, rec *orchestrate.StepRecord, at time.Time) {
	t.mu.Lock()
	sp, ok := rs.steps[rec.Path]
	if !ok || rs.ended[rec.Path] {
		t.mu.Unlock()
		return
	}
	rs.ended[rec.Path] = true
	t.mu.Unlock()
	sp.SetAttributes(AttrStatus.String(rec.Status), AttrAttempts.Int(rec.Attempts))
	if rec.Error != nil {
		sp.SetAttributes(AttrErrorCode.String(rec.Error.Code))
	}
	if rec.Status != orchestrate.StatusSuccess && rec.Status != orchestrate.StatusSkipped {
		msg := rec.Status
		if rec.Error != nil {
			msg = rec.Error.Code + ": " + rec.Error.Message
		}
		sp.SetStatus(codes.Error, msg)
	}
	end := at
	if rec.StartedAt != nil && rec.DurationMS > 0 {
		end = rec.StartedAt.Add(time.Duration(rec.DurationMS) * time.Millisecond)
	}
	sp.End(trace.WithTimestamp(end))
}

// finishRun ends what is still open (steps of a halted or timed-out plan
// end without an event of their own), the run's span, and counts the run.
func (t *Telemetry) finishRun(info *orchestrate.RunInfo, rs *runSpans, env *orchestrate.Envelope, at time.Time) {
	ctx := context.Background()
	status := orchestrate.StatusFailed
	if env != nil && env.Artifact != nil {
		a := env.Artifact
		status = a.Status
		var walk func([]*orchestrate.StepRecord)
		walk = func(recs []*orchestrate.StepRecord) {
			for _, rec := range recs {
				walk(rec.Children)
				t.endStep(rs, rec, at)
				tool := rec.Tool
				attrs := []attribute.KeyValue{AttrStatus.String(rec.Status), AttrStepType.String(rec.Type)}
				if tool != "" {
					attrs = append(attrs, AttrTool.String(tool))
				}
				set := metric.WithAttributeSet(attribute.NewSet(attrs...))
				t.steps.Add(ctx, 1, set)
				if rec.StartedAt != nil {
					t.stepDuration.Record(ctx, float64(rec.DurationMS)/1000, set)
				}
			}
		}
		walk(a.Steps)
		for _, e := range a.Errors {
			if e.Code == orchestrate.CodeDepthExceeded {
				t.depthRejections.Add(ctx, 1)
				break
			}
		}
		if p := a.Planner; p != nil && p.Attempts > 0 {
			t.plannerAttempts.Add(ctx, int64(p.Attempts), metric.WithAttributes(AttrModel.String(p.Model)))
		}
		rs.span.SetAttributes(AttrLeaves.Int(info.Leaves), AttrStatus.String(status))
		if p := a.Planner; p != nil && p.Model != "" {
			rs.span.SetAttributes(AttrModel.String(p.Model))
		}
		if status != orchestrate.StatusSuccess {
			msg := status
			if len(a.Errors) > 0 {
				msg = a.Errors[0].Code + ": " + a.Errors[0].Message
			} else if len(a.ValidationErrors) > 0 {
				msg = "validation: " + a.ValidationErrors[0].Message
			}
			rs.span.SetStatus(codes.Error, msg)
		}
	}
	t.mu.Lock()
	if rs.planner != nil {
		rs.planner.End(trace.WithTimestamp(at))
		rs.planner = nil
	}
	for path, sp := range rs.steps {
		if !rs.ended[path] {
			sp.End(trace.WithTimestamp(at))
		}
	}
	t.mu.Unlock()
	rs.span.End(trace.WithTimestamp(at))
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
