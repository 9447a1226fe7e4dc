package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure the Streamable HTTP transport.
type HTTPOptions struct {
	// Stateless serves each request without a session (protocol
	// 2026-07-28 and no server-to-client requests).
	Stateless bool
}

// HTTPHandler returns the HTTP handler: Streamable HTTP at /mcp, with the
// SDK's DNS-rebinding protection, cross-origin protection and the request
// body limit, and a health check at /healthz.
func (a *App) HTTPHandler(opts HTTPOptions) http.Handler {
	cfg := a.Config.Server
	var idle time.Duration
	if cfg.SessionTimeout != nil {
		idle = *cfg.SessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.Server }, &mcp.StreamableHTTPOptions{
		Stateless:           opts.Stateless,
		Logger:              a.log,
		SessionTimeout:      idle,
		MaxRequestBodyBytes: cfg.MaxRequestBytes,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.NewCrossOriginProtection().Handler(h))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"tools\":%d}\n", len(a.Catalog.Names()))
	})
	return mux
}

// ServeHTTP serves Streamable HTTP on ln until ctx is done, then shuts down
// gracefully: it stops accepting, lets in-flight plans finish for the
// configured grace period, cancels those still running, and closes.
func (a *App) ServeHTTP(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	srv := &http.Server{
		Handler:           a.HTTPHandler(opts),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
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
	a.log.Info("shutting down", "in_flight_plans", a.InFlight(), "grace", grace)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = srv.Shutdown(sctx) // stops accepting; closes idle connections
	}()
	if !a.waitIdle(grace) {
		a.log.Warn("cancelling plans still running after the grace period", "in_flight_plans", a.InFlight())
		a.cancelPlans()
		a.waitIdle(5 * time.Second)
	}
	err := srv.Close() // ends long-lived streams
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
