package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/server/httpedge"
	"github.com/orchestra-mcp/orchestra/viewer"
)

// HTTPOptions configure the Streamable HTTP transport.
type HTTPOptions struct {
	// Stateless serves each request without a session (protocol
	// 2026-07-28 and no server-to-client requests).
	Stateless bool
}

// HTTPHandler returns the HTTP handler: Streamable HTTP at /mcp, with the
// SDK's DNS-rebinding protection, cross-origin protection, the request
// body limit and read timeout, bearer-token authentication when
// server.auth is configured, per-client rate limits and the session cap,
// a health check at /healthz, and the web viewer of the records at /ui/
// (behind the same authentication and rate limits).
//
// A stateful server serves protocol 2026-07-28 too: that revision has no
// sessions, so its requests (which carry the version in the
// Mcp-Protocol-Version header) go to a stateless handler of the same
// server, while older clients get sessions.
func (a *App) HTTPHandler(opts HTTPOptions) http.Handler {
	cfg := a.Config.Server
	var idle time.Duration
	if cfg.SessionTimeout != nil {
		idle = *cfg.SessionTimeout
	}
	sdk := func(stateless bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.Server }, &mcp.StreamableHTTPOptions{
			Stateless:           stateless,
			Logger:              a.log,
			SessionTimeout:      idle,
			MaxRequestBodyBytes: cfg.MaxRequestBytes,
			// On 2026-07-28 the POST is the whole request: a client that
			// drops it cannot get the answer, so its plan is cancelled.
			PropagateRequestCancellation: true,
		})
	}
	var h http.Handler
	if opts.Stateless {
		h = sdk(true)
	} else {
		sessions, modern := sdk(false), sdk(true)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if httpedge.ModernProtocol(r) {
				modern.ServeHTTP(w, r)
				return
			}
			sessions.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	in := &httpedge.Intake{Server: cfg, Stateless: opts.Stateless, Sessions: a.sessionCount, Calls: &a.calls, Tokens: a.tokens}
	var mcpHandler http.Handler = http.NewCrossOriginProtection().Handler(in.Handler(h))
	if a.tokens != nil {
		if tl := httpedge.NewTenantLimits(a.Config.Tenants, time.Now); tl != nil {
			mcpHandler = tl.Limit(mcpHandler) // after authentication, which names the tenant
		}
	}
	// Rate limits: per caller once it is authenticated (its owner), per
	// address without authentication, and per address for requests whose
	// credential fails, checked before it is looked at.
	var failures *httpedge.RateLimiter
	if rl := cfg.RateLimit; rl.RequestsPerSecond > 0 {
		mcpHandler = httpedge.NewRateLimiter(rl.RequestsPerSecond, rl.Burst).Limit(mcpHandler)
		if a.tokens != nil {
			failures = httpedge.NewRateLimiter(rl.RequestsPerSecond, rl.Burst)
			failures.Refusing("this address may fail authentication")
		}
	}
	if a.tokens != nil {
		mcpHandler = a.tokens.RequireToken(mcpHandler, failures)
	}
	mux.Handle("/mcp", mcpHandler)
	if a.tokens != nil && a.tokens.AcceptsJWT() {
		prm := httpedge.ProtectedResourceHandler(*a.Config.Server.Auth.JWT)
		mux.Handle(httpedge.ProtectedResourcePath, prm)
		mux.Handle(httpedge.ProtectedResourcePath+"/mcp", prm) // RFC 9728: the resource's path after the well-known one
	}
	if ui, err := a.viewerHandler(); err != nil {
		a.log.Error("the viewer is not served", "err", err)
	} else {
		if rl := cfg.RateLimit; rl.RequestsPerSecond > 0 {
			ui = httpedge.NewRateLimiter(rl.RequestsPerSecond, rl.Burst).Limit(ui) // per address: the viewer authenticates behind it
		}
		mux.Handle(viewer.DefaultPrefix, ui)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"tools\":%d}\n", len(a.Catalog.Names()))
	})
	return mux
}

// sessionCount counts the server's open HTTP sessions.
func (a *App) sessionCount() int {
	n := 0
	for ss := range a.Server.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// ServeHTTP serves Streamable HTTP on ln until ctx is done, then shuts down
// gracefully: it stops accepting, lets in-flight requests (and the plans
// they run) finish for the configured grace period, cancels the plans still
// running, waits for their responses to be written, and closes.
func (a *App) ServeHTTP(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	// reqs counts requests that expect an answer; GET streams stay open for
	// as long as a session lives and are not waited for.
	var reqs inflight
	defer a.listeners.Add(ln.Addr())() // http_request refuses to call this server
	h := a.HTTPHandler(opts)
	cfg := a.Config.Server
	ln = httpedge.LimitConnections(ln, cfg, a.log)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				reqs.add()
				defer reqs.done()
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: cfg.HeaderTimeout,
		// Keep-alive connections that carry nothing go after this long.
		IdleTimeout: 2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.log.Info("serving Streamable HTTP", "addr", ln.Addr().String(), "path", "/mcp", "stateless", opts.Stateless)

	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP: %w", err)
	case <-ctx.Done():
	}
	grace := a.Config.Server.ShutdownGrace
	a.log.Info("shutting down", "in_flight_plans", a.InFlight(), "in_flight_requests", reqs.count(), "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		_ = srv.Shutdown(sctx) // stops accepting; closes idle connections
	}()
	// Background runs have no request: their count is the plans'.
	if !waitFor(bothIdle(reqs.idle(), a.plans.idle()), grace) {
		a.log.Warn("cancelling plans still running after the grace period", "in_flight_plans", a.InFlight())
		a.cancelPlans()
		// A cancelled plan still answers with its partial results.
		if !waitFor(bothIdle(reqs.idle(), a.plans.idle()), cancelWait) {
			a.log.Warn("closing with requests still in flight", "in_flight_requests", reqs.count())
		}
	}
	err := srv.Close() // ends long-lived streams
	a.closeSessions()
	cancel()
	<-shut
	<-errc
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// cancelWait is how long shutdown waits for cancelled plans to answer.
const cancelWait = 5 * time.Second

// bothIdle returns a channel closed once a and b are both closed.
func bothIdle(a, b <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		<-a
		<-b
		close(c)
	}()
	return c
}

// waitFor waits up to d for c to be closed and reports whether it was.
func waitFor(c <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}
