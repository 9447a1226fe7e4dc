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
	"github.com/orchestra-mcp/orchestra/fsm"
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

// runLine is one log line about a run or a step.
type runLine struct {
	level slog.Level
	msg   string
	attrs []slog.Attr
}

// logLine turns an engine event into a log line. Every line carries
// request_id, exec_id, step_id and tool (for a line about the whole run,
// step_id is empty and tool is what started it).
func logLine(ev orchestrate.Event) (runLine, bool) {
	info := ev.Run
	if info == nil {
		return runLine{}, false
	}
	tr := ev.Transition
	ids := func(stepID, tool string) []slog.Attr {
		return []slog.Attr{
			slog.String("request_id", info.IDs.RequestID), slog.String("exec_id", info.ExecID),
			slog.String("step_id", stepID), slog.String("tool", tool),
		}
	}
	source := info.Source
	if source == "" {
		source = orchestrate.ToolName
	}
	if s := ev.Step; s != nil {
		tool := s.Tool
		if s.Type == "parallel" {
			tool = "parallel"
		}
		at := ids(s.ID, tool)
		switch {
		case tr.Event == orchestrate.EventProgress && ev.Progress != nil:
			at = append(at, slog.Float64("progress", ev.Progress.Progress), slog.Float64("total", ev.Progress.Total), slog.String("message", ev.Progress.Message))
			return runLine{slog.LevelDebug, "step progress", at}, true
		case stepStarted(ev):
			return runLine{slog.LevelDebug, "step started", append(at, slog.String("step_exec_id", s.ExecID))}, true
		case stepEnded(ev):
			at = append(at, slog.String("status", s.Status), slog.Int64("duration_ms", s.DurationMS), slog.Int("attempts", s.Attempts))
			level := slog.LevelDebug // a run's lines are info; its steps' only when they fail
			if s.Error != nil {
				at = append(at, slog.String("code", s.Error.Code), slog.String("error", s.Error.Message))
				level = slog.LevelInfo
				if s.Status != orchestrate.StatusSkipped {
					level = slog.LevelWarn
				}
			}
			return runLine{level, "step finished", at}, true
		}
	}
	at := ids("", source)
	switch tr.Event {
	case orchestrate.EventFinal:
		env := ev.Envelope
		if env == nil || env.Artifact == nil {
			return runLine{slog.LevelWarn, "run finished", append(at, slog.String("status", orchestrate.StatusFailed))}, true
		}
		a := env.Artifact
		at = append(at, slog.String("status", a.Status), slog.Int64("duration_ms", env.Metadata.DurationMS), slog.Int("steps", info.Leaves), slog.Int("depth", info.Depth))
		if env.Metadata.Record != "" {
			at = append(at, slog.String("record", env.Metadata.Record))
		}
		level := slog.LevelInfo
		if !a.Success {
			level = slog.LevelWarn
			if len(a.Errors) > 0 {
				at = append(at, slog.String("code", a.Errors[0].Code), slog.String("error", a.Errors[0].Message))
			} else if len(a.ValidationErrors) > 0 {
				at = append(at, slog.String("code", a.ValidationErrors[0].Code), slog.String("error", a.ValidationErrors[0].Message))
			}
		}
		return runLine{level, "run finished", at}, true
	case fsm.EventStartPlan:
		return runLine{slog.LevelInfo, "run started: planning", append(at, slog.Int("depth", info.Depth))}, true
	case fsm.EventValidated, fsm.EventPlannerFinished:
		return runLine{slog.LevelInfo, "plan validated", append(at, slog.Int("steps", info.Leaves), slog.Int("depth", info.Depth))}, true
	case fsm.EventValidationFailed:
		return runLine{slog.LevelInfo, "plan not run", append(at, slog.Int("depth", info.Depth))}, true
	case fsm.EventTimeout, fsm.EventCancelled, fsm.EventPanic:
		return runLine{slog.LevelWarn, "run stopped: " + tr.Event, at}, true
	case orchestrate.EventProgress:
		return runLine{}, false
	}
	return runLine{slog.LevelDebug, "transition", append(at, slog.String("event", tr.Event), slog.String("from", tr.From), slog.String("to", tr.To))}, true
}

// logObserver writes the log lines of runs to log.
func logObserver(log *slog.Logger) orchestrate.Observer {
	return func(ev orchestrate.Event) {
		if l, ok := logLine(ev); ok && log.Enabled(context.Background(), l.level) {
			log.LogAttrs(context.Background(), l.level, l.msg, l.attrs...)
		}
	}
}

// clientLogObserver sends the same lines to the client of one request as
// MCP logging notifications, at the level the client asked for (on
// protocol 2026-07-28, the level of the request's _meta, which ctx
// carries). Nothing is sent before the client sets a level: levels says
// whether it did.
func clientLogObserver(ctx context.Context, req *mcp.CallToolRequest, secrets []string, levels *logLevels) orchestrate.Observer {
	if !levels.wanted(req) {
		return nil
	}
	h := NewRedactingHandler(mcp.NewLoggingHandler(req.Session, &mcp.LoggingHandlerOptions{LoggerName: "orchestra"}), secrets)
	log := slog.New(h)
	return func(ev orchestrate.Event) {
		if l, ok := logLine(ev); ok && h.Enabled(ctx, l.level) {
			log.LogAttrs(ctx, l.level, l.msg, l.attrs...)
		}
	}
}
