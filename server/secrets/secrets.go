package secrets

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

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/boundedmap"
	"github.com/orchestra-mcp/orchestra/internal/redact"
)

// Redacted replaces secrets in log lines.
const Redacted = redact.Marker

// secretKey matches attribute keys whose values are secrets whatever they
// hold.
var secretKey = regexp.MustCompile(`(?i)(authorization|password|passwd|secret|token|api[_-]?key|cookie|credential|headers?$|^env$)`)

// credentialText matches credentials written into text: "Bearer abc", "Basic abc".
var credentialText = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}`)

// Of returns the values of cfg that must never be logged: the
// environment values, headers and URL credentials and query values of
// downstream servers (mcpserver.ServerConfig.Secrets), the bearer tokens
// of HTTP authentication and the planner's API key, plus the values of
// environment variables whose names say they are secrets. Short values
// (under 4 bytes) are left out: they would redact ordinary words.
func Of(cfg *config.Config) []string {
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

// Handler wraps a slog.Handler so that no secret reaches it: the
// values of attributes whose keys name secrets (authorization, token,
// password, headers, env, ...) are replaced whole, and every known secret
// value and every "Bearer ..." credential is cut out of the message and of
// every string, error and formatted value, in groups too.
type Handler struct {
	h       slog.Handler
	secrets []string
}

// NewHandler returns h with secrets redacted; see [Of].
func NewHandler(h slog.Handler, secrets []string) *Handler {
	return &Handler{h: h, secrets: secrets}
}

// Enabled implements slog.Handler.
func (r *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return r.h.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (r *Handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (r *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = r.attr(a)
	}
	return &Handler{h: r.h.WithAttrs(red), secrets: r.secrets}
}

// WithGroup implements slog.Handler.
func (r *Handler) WithGroup(name string) slog.Handler {
	return &Handler{h: r.h.WithGroup(name), secrets: r.secrets}
}

func (r *Handler) attr(a slog.Attr) slog.Attr {
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
func (r *Handler) text(s string) string { return Redact(s, r.secrets) }

// Redact cuts out of s every one of secrets (see [Of]) and every
// "Bearer ..." or "Basic ..." credential.
func Redact(s string, secrets []string) string {
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
