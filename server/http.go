package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// HTTPOptions configure the Streamable HTTP transport.
type HTTPOptions struct {
	// Stateless serves each request without a session (protocol
	// 2026-07-28 and no server-to-client requests).
	Stateless bool
}

// HTTPHandler returns the HTTP handler: Streamable HTTP at /mcp, with the
// SDK's DNS-rebinding protection, cross-origin protection, the request
// body limit, bearer-token authentication when server.auth is configured
// and per-client rate limits, and a health check at /healthz.
func (a *App) HTTPHandler(opts HTTPOptions) http.Handler {
	cfg := a.Config.Server
	if opts.Stateless {
		a.logLevels.stateless.Store(true)
	}
	var idle time.Duration
	if cfg.SessionTimeout != nil {
		idle = *cfg.SessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.Server }, &mcp.StreamableHTTPOptions{
		Stateless:           opts.Stateless,
		Logger:              a.log,
		SessionTimeout:      idle,
		MaxRequestBodyBytes: cfg.MaxRequestBytes,
		// On 2026-07-28 the POST is the whole request: a client that
		// drops it cannot get the answer, so its plan is cancelled.
		PropagateRequestCancellation: true,
	})
	mux := http.NewServeMux()
	var mcpHandler http.Handler = http.NewCrossOriginProtection().Handler(limitBody(cfg.MaxRequestBytes, h))
	if a.tokens != nil {
		mcpHandler = a.tokens.requireToken(mcpHandler)
	}
	if rl := cfg.RateLimit; rl.RequestsPerSecond > 0 {
		mcpHandler = newRateLimiter(rl.RequestsPerSecond, rl.Burst, a.tokens).limit(mcpHandler)
	}
	mux.Handle("/mcp", mcpHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"tools\":%d}\n", len(a.Catalog.Names()))
	})
	return mux
}

// limitBody answers a request whose body is larger than limit with 413
// and a JSON-RPC error, for the request's id, that says how to fix it. The
// SDK's own limit answers with plain text, which makes its client drop the
// whole session; an error for the request fails only that request.
func limitBody(limit int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || limit <= 0 {
			h.ServeHTTP(w, r)
			return
		}
		size := r.ContentLength
		var data []byte
		if size <= limit {
			// Unknown or small enough: read at most limit+1 bytes to be sure.
			var err error
			data, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusBadRequest)
				return
			}
			if int64(len(data)) <= limit {
				r.Body = io.NopCloser(bytes.NewReader(data))
				h.ServeHTTP(w, r)
				return
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
			return
		}
		resp, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write(resp)
	})
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
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				reqs.add()
				defer reqs.done()
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
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
	if !waitFor(reqs.idle(), grace) {
		a.log.Warn("cancelling plans still running after the grace period", "in_flight_plans", a.InFlight())
		a.cancelPlans()
		// A cancelled plan still answers with its partial results.
		if !waitFor(reqs.idle(), cancelWait) {
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
