package runlog

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server/secrets"
)

// runLog writes the lines of runs: every line carries request_id,
// exec_id, step_id and tool (for a line about the whole run, step_id is
// empty and tool is what started it). A line is built only when its level
// is enabled.
type runLog struct {
	enabled func(slog.Level) bool
	emit    func(level slog.Level, msg string, attrs []slog.Attr)
}

// lineIDs are the attributes every line starts with.
func lineIDs(info *orchestrate.RunInfo, stepID, tool string, extra int) []slog.Attr {
	return append(make([]slog.Attr, 0, 4+extra),
		slog.String("request_id", info.IDs.RequestID), slog.String("exec_id", info.ExecID),
		slog.String("step_id", stepID), slog.String("tool", tool))
}

// runIDs are the attributes of a line about the whole run.
func runIDs(info *orchestrate.RunInfo, extra int) []slog.Attr {
	source := info.Source
	if source == "" {
		source = orchestrate.ToolName
	}
	return lineIDs(info, "", source, extra)
}

// stepIDs are the attributes of a line about step rec.
func stepIDs(info *orchestrate.RunInfo, rec *orchestrate.StepRecord, extra int) []slog.Attr {
	tool := rec.Tool
	if rec.Type == "parallel" || rec.Type == orchestrate.TypeForEach {
		tool = rec.Type
	}
	if rec.Iteration != nil {
		return append(lineIDs(info, rec.ID, tool, extra+1), slog.Int("iteration", *rec.Iteration))
	}
	return lineIDs(info, rec.ID, tool, extra)
}

// hooks returns the engine hooks that write the lines.
func (l runLog) hooks() *orchestrate.Hooks {
	return &orchestrate.Hooks{
		RunStarted: func(i orchestrate.RunStartedInfo) {
			if i.Planning && l.enabled(slog.LevelInfo) {
				l.emit(slog.LevelInfo, "run started: planning", append(runIDs(i.Run, 1), slog.Int("depth", i.Run.Depth)))
			}
		},
		PlanReady: func(i orchestrate.PlanReadyInfo) {
			if l.enabled(slog.LevelInfo) {
				l.emit(slog.LevelInfo, "plan validated", append(runIDs(i.Run, 2), slog.Int("steps", i.Run.Leaves), slog.Int("depth", i.Run.Depth)))
			}
		},
		StepStarted: func(i orchestrate.StepStartedInfo) {
			if l.enabled(slog.LevelDebug) {
				l.emit(slog.LevelDebug, "step started", append(stepIDs(i.Run, i.Step, 1), slog.String("step_exec_id", i.Step.ExecID)))
			}
		},
		StepProgress: func(i orchestrate.StepProgressInfo) {
			if l.enabled(slog.LevelDebug) {
				p := i.Progress
				l.emit(slog.LevelDebug, "step progress", append(stepIDs(i.Run, i.Step, 3),
					slog.Float64("progress", p.Progress), slog.Float64("total", p.Total), slog.String("message", p.Message)))
			}
		},
		StepEnded: func(i orchestrate.StepEndedInfo) {
			s := i.Step
			level := slog.LevelDebug // a run's lines are info; its steps' only when they fail
			if s.Error != nil {
				level = slog.LevelInfo
				if s.Status != orchestrate.StatusSkipped {
					level = slog.LevelWarn
				}
			}
			if !l.enabled(level) {
				return
			}
			at := append(stepIDs(i.Run, s, 8), slog.String("status", s.Status), slog.Int64("duration_ms", s.DurationMS), slog.Int("attempts", s.Attempts))
			msg := "step finished"
			if s.Error != nil {
				at = append(at, slog.String("code", string(s.Error.Code)), slog.String("error", s.Error.Message))
				if failedCall(s) {
					// The event of a failing tool, with every id its tool
					// was given.
					msg = FailedCall(s.Tool)
					ids := i.Run.IDs
					at = append(at, slog.String("context_id", ids.ContextID), slog.String("user_id", ids.UserID), slog.String("tenant", ids.Tenant))
				}
			}
			l.emit(level, msg, at)
		},
		RunPaused: func(i orchestrate.RunPausedInfo) {
			if l.enabled(slog.LevelInfo) {
				l.emit(slog.LevelInfo, "run paused: waiting for the client", runIDs(i.Run, 0))
			}
		},
		RunResumed: func(i orchestrate.RunResumedInfo) {
			if l.enabled(slog.LevelInfo) {
				l.emit(slog.LevelInfo, "run resumed", runIDs(i.Run, 0))
			}
		},
		RunFinished: func(i orchestrate.RunFinishedInfo) {
			if i.Err != nil && l.enabled(slog.LevelError) {
				l.emit(slog.LevelError, "engine error", append(runIDs(i.Run, 1), slog.String("error", i.Err.Error())))
			}
			env := i.Envelope
			if env == nil || env.Artifact == nil {
				if l.enabled(slog.LevelWarn) {
					l.emit(slog.LevelWarn, "run finished", append(runIDs(i.Run, 1), slog.String("status", orchestrate.StatusFailed)))
				}
				return
			}
			a := env.Artifact
			level := slog.LevelInfo
			if !a.Success {
				level = slog.LevelWarn
			}
			if !l.enabled(level) {
				return
			}
			at := append(runIDs(i.Run, 7), slog.String("status", a.Status), slog.Int64("duration_ms", env.Metadata.DurationMS), slog.Int("steps", i.Run.Steps()), slog.Int("depth", i.Run.Depth))
			if env.Metadata.Record != "" {
				at = append(at, slog.String("record", env.Metadata.Record))
			}
			if !a.Success {
				if len(a.Errors) > 0 {
					at = append(at, slog.String("code", string(a.Errors[0].Code)), slog.String("error", a.Errors[0].Message))
				} else if len(a.ValidationErrors) > 0 {
					at = append(at, slog.String("code", string(a.ValidationErrors[0].Code)), slog.String("error", a.ValidationErrors[0].Message))
				}
			}
			l.emit(level, "run finished", at)
		},
	}
}

// Hooks returns the hooks that write the lines of runs to log. The
// log's level is set once, at start: below debug, no line reads a step's
// progress, so the hooks do not ask for it, and a downstream call then
// carries no progress token (nothing to route).
func Hooks(log *slog.Logger) *orchestrate.Hooks {
	ctx := context.Background()
	h := runLog{
		enabled: func(level slog.Level) bool { return log.Enabled(ctx, level) },
		emit:    func(level slog.Level, msg string, at []slog.Attr) { log.LogAttrs(ctx, level, msg, at...) },
	}.hooks()
	if !log.Enabled(ctx, slog.LevelDebug) {
		h.StepProgress = nil
	}
	return h
}

// ClientHooks returns the hooks that send the same lines to the client
// of one request as MCP logging notifications, at the level the client
// asked for (on protocol 2026-07-28, the level of the request's _meta,
// which ctx carries). Nothing is sent before the client sets a level:
// levels says whether it did, and without one ClientHooks returns nil.
func ClientHooks(ctx context.Context, req *mcp.CallToolRequest, redact []string, levels *Levels) *orchestrate.Hooks {
	if !levels.wanted(req) {
		return nil
	}
	h := secrets.NewHandler(mcp.NewLoggingHandler(req.Session, &mcp.LoggingHandlerOptions{LoggerName: "orchestra"}), redact)
	log := slog.New(h)
	return runLog{
		enabled: func(level slog.Level) bool { return h.Enabled(ctx, level) },
		emit:    func(level slog.Level, msg string, at []slog.Attr) { log.LogAttrs(ctx, level, msg, at...) },
	}.hooks()
}

// FailedCall is the message of the line of a tool call that failed:
// "<tool>: call failed". The line carries the ids the tool was given
// (request_id, context_id, user_id, tenant, exec_id, step_id), and the
// error's code and message.
func FailedCall(tool string) string { return tool + ": call failed" }

// failedCall reports whether rec is a tool step whose call failed (not
// one skipped or cancelled, which never called or did not end on its own).
func failedCall(rec *orchestrate.StepRecord) bool {
	return (rec.Type == "tool" || rec.Type == "agent") && rec.Tool != "" && (rec.Status == orchestrate.StatusFailed || rec.Status == orchestrate.StatusPartial) &&
		rec.Error.Code != orchestrate.CodeCancelled
}
