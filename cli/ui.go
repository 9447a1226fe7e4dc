package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/viewer"
)

// cmdUI serves the web viewer of a local store on loopback, with no
// authentication: like serve --http without server.auth, loopback is the
// machine's own, and its user sees every run.
func cmdUI(ctx context.Context, env *cliEnv, args []string) int {
	var cf commonFlags
	fs := newFlagSet(env, "ui", &cf)
	cf.storeFlag(fs)
	addr := fs.String("addr", "127.0.0.1:0", "serve at `ADDR`, a loopback host:port (:port for 127.0.0.1:port; port 0 picks a free one)")
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if code, ok := noArgs(env, fs, "ui takes only flags; the store is --store PATH"); !ok {
		return code
	}
	hostport, err := listenAddr(*addr, false)
	if err != nil {
		return env.usageError(fmt.Sprintf("invalid --addr %q: the viewer of a local store serves loopback only", *addr),
			"use --addr 127.0.0.1:8090; to show runs to other machines, use orchestra serve --http with server.auth, which serves the viewer at /ui/ behind its tokens")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return ExitInvalid
	}
	st, ok := env.openStore(ctx, cfg, store.Options{Logger: logger, Retention: retention(cfg)})
	if !ok {
		return ExitFailed
	}
	v, err := viewer.New(viewer.Options{Records: st, Logger: logger})
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		env.errorf("listening on %s: %v", hostport, err)
		return ExitFailed
	}
	mux := http.NewServeMux()
	mux.Handle(viewer.DefaultPrefix, v)
	mux.Handle("GET /{$}", http.RedirectHandler(viewer.DefaultPrefix, http.StatusSeeOther))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(env.stdout, "http://%s%s\n", ln.Addr(), viewer.DefaultPrefix)
	fmt.Fprintf(env.stderr, "orchestra: serving the viewer of %s at http://%s%s (Ctrl-C stops it)\n", cfg.Store.Path, ln.Addr(), viewer.DefaultPrefix)
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
		<-done
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		env.errorf("serving the viewer: %v", err)
		return ExitFailed
	}
	return ExitOK
}
