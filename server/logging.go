package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/boundedmap"
	"github.com/orchestra-mcp/orchestra/internal/redact"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// Redacted replaces secrets in log lines.
const Redacted = redact.Marker

// secretKey matches attribute keys whose values are secrets whatever they
// hold.
var secretKey = regexp.MustCompile(`(?i)(authorization|password|passwd|secret|token|api[_-]?key|cookie|credential|headers?$|^env$)`)

// credentialText matches credentials written into text: "Bearer abc", "Basic abc".
var credentialText = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}`)

// Secrets returns the values of cfg that must never be logged: the
// environment values, headers and URL credentials and query values of
// downstream servers (mcpserver.ServerConfig.Secrets), the bearer tokens
// of HTTP authentication and the planner's API key, plus the values of
// environment variables whose names say they are secrets. Short values
// (under 4 bytes) are left out: they would redact ordinary words.
func Secrets(cfg *config.Config) []string {
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= 4 {
			seen[v] = true
		}
	}
	if cfg != nil {
		for _, s := range cfg.MCPServers {
			for _, v := range s.Secrets() {
				add(v)
			}
		}
		if p := cfg.Planner; p != nil {
			for _, env := range []string{p.APIKeyEnv, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
				if env != "" {
					add(os.Getenv(env))
				}
			}
		}
		if env := cfg.Server.Auth.TokensEnv; env != "" {
			for _, t := range strings.FieldsFunc(os.Getenv(env), func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
				add(t)
			}
		}
		for _, t := range cfg.Server.Auth.Tokens {
			if v, err := t.Value(os.LookupEnv); err == nil {
				add(v)
			}
		}
		if file := cfg.Server.Auth.TokensFile; file != "" {
			if data, err := os.ReadFile(file); err == nil {
				for _, line := range strings.Split(string(data), "\n") {
					add(strings.TrimSpace(line))
				}
			}
		}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if secretKey.MatchString(k) || strings.HasSuffix(strings.ToUpper(k), "_KEY") {
			add(v)
		}
	}
	out := slices.Collect(maps.Keys(seen))
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// RedactingHandler wraps a slog.Handler so that no secret reaches it: the
// values of attributes whose keys name secrets (authorization, token,
// password, headers, env, ...) are replaced whole, and every known secret
// value and every "Bearer ..." credential is cut out of the message and of
// every string, error and formatted value, in groups too.
type RedactingHandler struct {
	h       slog.Handler
	secrets []string
}

// NewRedactingHandler returns h with secrets redacted; see [Secrets].
func NewRedactingHandler(h slog.Handler, secrets []string) *RedactingHandler {
	return &RedactingHandler{h: h, secrets: secrets}
}

// Enabled implements slog.Handler.
func (r *RedactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return r.h.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (r *RedactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (r *RedactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = r.attr(a)
	}
	return &RedactingHandler{h: r.h.WithAttrs(red), secrets: r.secrets}
}

// WithGroup implements slog.Handler.
func (r *RedactingHandler) WithGroup(name string) slog.Handler {
	return &RedactingHandler{h: r.h.WithGroup(name), secrets: r.secrets}
}

func (r *RedactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if isSecretKey(a.Key) && !(v.Kind() == slog.KindString && v.String() == "") {
		return slog.String(a.Key, Redacted)
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.text(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = r.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, r.text(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, r.text(x.String()))
		case []string:
			red := make([]string, len(x))
			for i, s := range x {
				red[i] = r.text(s)
			}
			return slog.Any(a.Key, red)
		default:
			return slog.String(a.Key, r.text(fmt.Sprintf("%+v", x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// text cuts secrets out of s.
func (r *RedactingHandler) text(s string) string { return RedactText(s, r.secrets) }

// RedactText cuts out of s every one of secrets (see [Secrets]) and every
// "Bearer ..." or "Basic ..." credential.
func RedactText(s string, secrets []string) string {
	s = redact.Secrets(secrets).String(s)
	if !mayHoldCredential(s) {
		return s
	}
	return credentialText.ReplaceAllString(s, "$1 "+Redacted)
}

// mayHoldCredential reports whether s contains "bearer" or "basic" in any
// case: only then can credentialText match, and most strings are spared
// the regular expression.
func mayHoldCredential(s string) bool {
	for i := 0; i+5 <= len(s); i++ {
		if s[i]|0x20 != 'b' {
			continue
		}
		if strings.EqualFold(s[i:i+5], "basic") || i+6 <= len(s) && strings.EqualFold(s[i:i+6], "bearer") {
			return true
		}
	}
	return false
}

// secretKeys remembers which attribute keys secretKey matches: a log line
// has a handful of keys, the same on every line.
var secretKeys = boundedmap.Map[string, bool]{Max: 4096}

// isSecretKey reports whether secretKey matches k.
func isSecretKey(k string) bool {
	if secret, ok := secretKeys.Get(k); ok {
		return secret
	}
	return secretKeys.Put(k, secretKey.MatchString(k))
}

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
			at := append(stepIDs(i.Run, s, 5), slog.String("status", s.Status), slog.Int64("duration_ms", s.DurationMS), slog.Int("attempts", s.Attempts))
			if s.Error != nil {
				at = append(at, slog.String("code", s.Error.Code), slog.String("error", s.Error.Message))
			}
			l.emit(level, "step finished", at)
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
					at = append(at, slog.String("code", a.Errors[0].Code), slog.String("error", a.Errors[0].Message))
				} else if len(a.ValidationErrors) > 0 {
					at = append(at, slog.String("code", a.ValidationErrors[0].Code), slog.String("error", a.ValidationErrors[0].Message))
				}
			}
			l.emit(level, "run finished", at)
		},
	}
}

// logHooks returns the hooks that write the lines of runs to log. The
// log's level is set once, at start: below debug, no line reads a step's
// progress, so the hooks do not ask for it, and a downstream call then
// carries no progress token (nothing to route).
func logHooks(log *slog.Logger) *orchestrate.Hooks {
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

// clientLogHooks returns the hooks that send the same lines to the client
// of one request as MCP logging notifications, at the level the client
// asked for (on protocol 2026-07-28, the level of the request's _meta,
// which ctx carries). Nothing is sent before the client sets a level:
// levels says whether it did, and without one clientLogHooks returns nil.
func clientLogHooks(ctx context.Context, req *mcp.CallToolRequest, secrets []string, levels *logLevels) *orchestrate.Hooks {
	if !levels.wanted(req) {
		return nil
	}
	h := NewRedactingHandler(mcp.NewLoggingHandler(req.Session, &mcp.LoggingHandlerOptions{LoggerName: "orchestra"}), secrets)
	log := slog.New(h)
	return runLog{
		enabled: func(level slog.Level) bool { return h.Enabled(ctx, level) },
		emit:    func(level slog.Level, msg string, at []slog.Attr) { log.LogAttrs(ctx, level, msg, at...) },
	}.hooks()
}
