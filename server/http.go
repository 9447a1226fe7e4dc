package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
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
	if opts.Stateless {
		a.logLevels.stateless.Store(true)
	}
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
			if modernProtocol(r) {
				modern.ServeHTTP(w, r)
				return
			}
			sessions.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	var mcpHandler http.Handler = http.NewCrossOriginProtection().Handler(a.intake(opts, h))
	if a.tokens != nil {
		if tl := newTenantLimits(a.Config.Tenants, time.Now); tl != nil {
			mcpHandler = tl.limit(mcpHandler) // after authentication, which names the tenant
		}
		mcpHandler = a.tokens.requireToken(mcpHandler)
	}
	if rl := cfg.RateLimit; rl.RequestsPerSecond > 0 {
		mcpHandler = newRateLimiter(rl.RequestsPerSecond, rl.Burst, a.tokens).limit(mcpHandler)
	}
	mux.Handle("/mcp", mcpHandler)
	if a.tokens != nil && a.tokens.jwt != nil {
		prm := protectedResourceHandler(*a.Config.Server.Auth.JWT)
		mux.Handle(ProtectedResourcePath, prm)
		mux.Handle(ProtectedResourcePath+"/mcp", prm) // RFC 9728: the resource's path after the well-known one
	}
	if ui, err := a.viewerHandler(); err != nil {
		a.log.Error("the viewer is not served", "err", err)
	} else {
		if rl := cfg.RateLimit; rl.RequestsPerSecond > 0 {
			ui = newRateLimiter(rl.RequestsPerSecond, rl.Burst, a.tokens).limit(ui)
		}
		mux.Handle(viewer.DefaultPrefix, ui)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"tools\":%d}\n", len(a.Catalog.Names()))
	})
	return mux
}

// modernProtocol reports whether r speaks protocol 2026-07-28 or later,
// which carries its version in a header on every request.
func modernProtocol(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
}

// intake reads a POST's body within server.body_timeout and
// server.max_request_bytes, refuses an initialize beyond
// server.max_sessions, and ties each tools/call to its connection
// (httpCalls) before h serves the request.
func (a *App) intake(opts HTTPOptions, h http.Handler) http.Handler {
	cfg := a.Config.Server
	limit := cfg.MaxRequestBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(callHeader)
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		data, ok := readBody(w, r, limit, cfg.BodyTimeout)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		m, ok := peek(data)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		switch {
		case m.Method == "initialize" && !opts.Stateless && !modernProtocol(r) && session == "":
			if n := a.sessionCount(); cfg.MaxSessions > 0 && n >= cfg.MaxSessions {
				msg := fmt.Sprintf("the server holds %d sessions, its limit (server.max_sessions): close sessions you no longer use (DELETE /mcp with the Mcp-Session-Id header), wait for idle ones to expire (server.session_timeout), or raise server.max_sessions in the configuration file", n)
				writeError(w, http.StatusServiceUnavailable, m.ID, codeServerBusy, msg)
				return
			}
		case m.Method == "tools/call":
			if id, ok := canonicalID(m.ID); ok {
				call, tok := a.calls.start(r, callKey{session: session, caller: clientKey(r, a.tokens), id: id})
				defer a.calls.end(tok)
				r.Header.Set(callHeader, tok)
				w = &callWriter{ResponseWriter: w, call: call}
			}
		case m.Method == "notifications/cancelled":
			if id, ok := canonicalID(m.Params.RequestID); ok {
				a.calls.cancelled(callKey{session: session, caller: clientKey(r, a.tokens), id: id})
			}
		}
		h.ServeHTTP(w, r)
	})
}

// codeServerBusy is the JSON-RPC error code of a request refused because
// a server-wide limit is reached (an implementation-defined server error).
const codeServerBusy = -32000

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

// readBody reads r's body within timeout. A body larger than limit is
// answered with 413 and a JSON-RPC error, for the request's id, that says
// how to fix it: the SDK's own limit answers with plain text, which makes
// its client drop the whole session, where an error for the request fails
// only that request. A body that does not arrive in time is answered with
// 408 and the connection closed.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, bool) {
	if timeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	if limit <= 0 {
		limit = math.MaxInt64 - 1
	}
	size := r.ContentLength
	var data []byte
	if size <= limit {
		// Unknown or small enough: read at most limit+1 bytes to be sure.
		var err error
		data, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			w.Header().Set("Connection", "close")
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				http.Error(w, fmt.Sprintf("the request body did not arrive within %s (server.body_timeout)", timeout), http.StatusRequestTimeout)
				return nil, false
			}
			http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusBadRequest)
			return nil, false
		}
		if int64(len(data)) <= limit {
			return data, true
		}
		size = -1
	} else {
		// Enough to find the request's id, which comes before its params.
		data, _ = io.ReadAll(io.LimitReader(r.Body, min(limit, 64<<10)))
	}
	what := "the request body"
	if size > 0 {
		what = fmt.Sprintf("the request body of %d bytes", size)
	}
	msg := fmt.Sprintf("%s is larger than the limit of %d bytes (server.max_request_bytes): send a smaller plan, pass large data by reference (a URL or a step that fetches it), or raise server.max_request_bytes in the configuration file", what, limit)
	w.Header().Set("Connection", "close") // the rest of the body is not read
	id, ok := requestID(data)
	if !ok {
		http.Error(w, msg, http.StatusRequestEntityTooLarge)
		return nil, false
	}
	writeError(w, http.StatusRequestEntityTooLarge, id, jsonrpc.CodeInvalidRequest, msg)
	return nil, false
}

// writeError answers with status and a JSON-RPC error for the request id
// (a jsonrpc.ID, or the id as raw JSON).
func writeError(w http.ResponseWriter, status int, id any, code int64, msg string) {
	var rid jsonrpc.ID
	switch id := id.(type) {
	case jsonrpc.ID:
		rid = id
	case json.RawMessage:
		var v any
		if json.Unmarshal(id, &v) == nil && v != nil {
			rid, _ = jsonrpc.MakeID(v)
		}
	}
	var resp []byte
	if rid.IsValid() {
		resp, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: rid, Error: &jsonrpc.Error{Code: code, Message: msg}})
	} else {
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(resp)
}

// requestID finds the id of the JSON-RPC request that data starts with.
func requestID(data []byte) (jsonrpc.ID, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return jsonrpc.ID{}, false
		}
		if key != "id" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return jsonrpc.ID{}, false
			}
			continue
		}
		var v any
		if err := dec.Decode(&v); err != nil || v == nil {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(v)
		return id, err == nil
	}
	return jsonrpc.ID{}, false
}

// ServeHTTP serves Streamable HTTP on ln until ctx is done, then shuts down
// gracefully: it stops accepting, lets in-flight requests (and the plans
// they run) finish for the configured grace period, cancels the plans still
// running, waits for their responses to be written, and closes.
func (a *App) ServeHTTP(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	// reqs counts requests that expect an answer; GET streams stay open for
	// as long as a session lives and are not waited for.
	var reqs inflight
	defer builtin.Listening(ln.Addr())() // http_request refuses to call this server
	h := a.HTTPHandler(opts)
	cfg := a.Config.Server
	ln = newLimitListener(ln, connectionCap(cfg.MaxConnections, openFileLimit(), a.log), cfg.MaxConnectionsPerClient, a.log)
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

// fileReserve is how many open files are kept for what is not an HTTP
// connection: the store, downstream servers, logs.
const fileReserve = 256

// connectionCap returns the connection cap to enforce: server.max_connections,
// lowered to fit the process's limit of open files when that is lower, so
// that connections can never exhaust the descriptors everything else needs.
func connectionCap(configured, files int, log *slog.Logger) int {
	if files <= 0 {
		return configured
	}
	fit := max(files-fileReserve, files/2)
	if configured <= 0 || configured > fit {
		log.Info("connection cap lowered to fit the limit of open files", "max_connections", configured, "open_file_limit", files, "cap", fit)
		return fit
	}
	return configured
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
