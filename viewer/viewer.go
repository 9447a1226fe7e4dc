package viewer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
)

// Records is what the viewer reads. *store.Store implements it; every read
// but Insights' is within a scope, and Insights takes one in its query.
type Records interface {
	List(ctx context.Context, opts store.ListOptions) ([]store.Run, string, error)
	RunIn(ctx context.Context, scope store.Scope, execID string) (*store.Run, error)
	OutlineIn(ctx context.Context, scope store.Scope, execID string) (*store.Run, []store.StepRecord, error)
	StepIn(ctx context.Context, scope store.Scope, execID, stepID string) (*store.StepRecord, error)
	PausesIn(ctx context.Context, scope store.Scope, execID string) ([]store.PauseEvent, error)
	Insights(ctx context.Context, q store.InsightQuery) ([]store.Insight, error)
}

// Identity is who is looking: the runs they see and the name shown.
type Identity struct {
	// Name is shown in the page's header: a token's name, a JWT's subject.
	Name string
	// Scope is the runs the caller sees.
	Scope store.Scope
	// Expires, when set, ends a browser session sooner than
	// Options.SessionTTL: when the credential expires.
	Expires time.Time
}

// Options configure a [Viewer].
type Options struct {
	// Records are the execution records shown. Required.
	Records Records
	// Authenticate checks a credential and says who holds it; an error
	// refuses it, and its message is shown to the caller (say how to fix
	// it, never echo the credential). Nil serves every run to every
	// caller, with no login: serve it on loopback only.
	Authenticate func(ctx context.Context, credential string) (Identity, error)
	// Prefix is the path the viewer is served under, with a trailing
	// slash; DefaultPrefix when empty.
	Prefix string
	// Logger receives the viewer's logs; nil discards them.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxSessions caps the browser sessions kept; past it the one that
	// would expire first is ended. 0 means DefaultMaxSessions.
	MaxSessions int
	// SessionTTL is how long a browser session lasts; 0 means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// PollInterval is how often a page over a running run asks for news;
	// 0 means DefaultPollInterval.
	PollInterval time.Duration
}

// Defaults of [Options].
const (
	DefaultPrefix       = "/ui/"
	DefaultMaxSessions  = 10000
	DefaultSessionTTL   = 12 * time.Hour
	DefaultPollInterval = time.Second
)

// Viewer is the web viewer, an http.Handler serving under Options.Prefix.
type Viewer struct {
	opts     Options
	prefix   string
	log      *slog.Logger
	now      func() time.Time
	pages    *pages
	sessions *sessions
	handler  http.Handler
}

// New returns a viewer of opts.Records.
func New(opts Options) (*Viewer, error) {
	if opts.Records == nil {
		return nil, errors.New("viewer: Options.Records is required")
	}
	v := &Viewer{opts: opts, prefix: opts.Prefix, log: opts.Logger, now: opts.Now}
	if v.prefix == "" {
		v.prefix = DefaultPrefix
	}
	if !strings.HasPrefix(v.prefix, "/") || !strings.HasSuffix(v.prefix, "/") {
		return nil, fmt.Errorf("viewer: Options.Prefix %q must start and end with a slash", v.prefix)
	}
	if v.log == nil {
		v.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.opts.PollInterval <= 0 {
		v.opts.PollInterval = DefaultPollInterval
	}
	ttl := opts.SessionTTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	max := opts.MaxSessions
	if max <= 0 {
		max = DefaultMaxSessions
	}
	v.sessions = newSessions(max, ttl, v.now)
	var err error
	if v.pages, err = loadPages(); err != nil {
		return nil, err
	}
	v.handler = v.routes()
	return v, nil
}

// routes returns the viewer's handler: its pages behind authentication,
// its static files and login form before it, all behind the host check,
// the security headers and cross-origin protection.
func (v *Viewer) routes() http.Handler {
	p := v.prefix
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+p+"static/{file}", v.static)
	mux.HandleFunc("GET "+p+"login", v.loginForm)
	mux.HandleFunc("POST "+p+"login", v.login)
	mux.HandleFunc("POST "+p+"logout", v.logout)
	mux.Handle("GET "+p+"{$}", v.authed(v.runsPage, true))
	mux.Handle("GET "+p+"runs/{id}", v.authed(v.runPage, true))
	mux.Handle("GET "+p+"runs/{id}/live", v.authed(v.livePart, false))
	mux.Handle("GET "+p+"runs/{id}/step", v.authed(v.stepPart, false))
	mux.Handle("GET "+p+"runs/{id}/raw", v.authed(v.raw, true))
	mux.Handle("GET "+p+"insights", v.authed(v.insightsPage, true))
	mux.Handle("GET "+p+"insights/{tool}", v.authed(v.toolPage, true))
	mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the viewer is read-only: only GET is served here", http.StatusMethodNotAllowed)
			return
		}
		v.fail(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
	var h http.Handler = mux
	h = http.NewCrossOriginProtection().Handler(h)
	return v.guard(h)
}

// ServeHTTP serves the viewer.
func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) { v.handler.ServeHTTP(w, r) }

// csp allows the viewer's own script, style sheet and requests only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// guard refuses requests whose query is too long and, when the viewer
// authenticates no one, those that reached a loopback listener under a
// host name that is not loopback's (DNS rebinding: a web page's script
// reading a local server through its own domain); with authentication
// such a page holds no credential, and a reverse proxy on loopback may
// pass its own host name. It sets the security headers of every response.
func (v *Viewer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if v.opts.Authenticate == nil && rebound(r) {
			http.Error(w, "this server answers on its loopback address only to the host names localhost, 127.0.0.1 and [::1]", http.StatusForbidden)
			return
		}
		if len(r.URL.RawQuery) > maxQuery {
			http.Error(w, fmt.Sprintf("the query string is %d bytes long; the viewer reads at most %d", len(r.URL.RawQuery), maxQuery), http.StatusRequestURITooLong)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rebound reports whether r came to a loopback address under a host name
// that is not a loopback one.
func rebound(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := local.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// authed serves h to an authenticated caller. A browser without a session
// is sent to the login form when page is set (a page it navigated to);
// the parts its script fetches answer 401.
func (v *Viewer) authed(h func(http.ResponseWriter, *http.Request, Identity), page bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, status, msg := v.identify(r)
		switch {
		case status == 0:
			w.Header().Set("Cache-Control", "no-store")
			h(w, r, id)
		case page && status == http.StatusUnauthorized && r.Header.Get("Authorization") == "":
			http.Redirect(w, r, v.prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		default:
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="orchestra"`)
			}
			http.Error(w, msg, status)
		}
	})
}

// identify returns who makes r: the holder of its bearer token, of its
// session cookie, or the machine's own caller when the viewer
// authenticates no one. A status other than 0 refuses r, with msg.
func (v *Viewer) identify(r *http.Request) (Identity, int, string) {
	if v.opts.Authenticate == nil {
		return Identity{}, 0, ""
	}
	if token, ok := bearer(r); ok {
		if len(token) > maxCredential {
			return Identity{}, http.StatusUnauthorized, fmt.Sprintf("the bearer token is %d bytes long; at most %d are accepted", len(token), maxCredential)
		}
		id, err := v.opts.Authenticate(r.Context(), token)
		if err != nil {
			return Identity{}, http.StatusUnauthorized, err.Error()
		}
		return id, 0, ""
	}
	if id, ok := v.sessions.get(r); ok {
		return id, 0, ""
	}
	return Identity{}, http.StatusUnauthorized, "authentication required: sign in at " + v.prefix + "login, or send the header \"Authorization: Bearer TOKEN\""
}

// bearer returns the bearer token of r.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
