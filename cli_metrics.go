package main

import (
	"context"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves h at /metrics on ln until the returned function is
// called.
func serveMetrics(ln net.Listener, h http.Handler) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
