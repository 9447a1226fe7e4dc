package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/server"
)

func cmdServe(ctx context.Context, env *cliEnv, args []string) int {
	cf := commonFlags{service: true}
	fs := newFlagSet(env, "serve", &cf)
	addr := fs.String("http", "", "serve Streamable HTTP at `ADDR` (host:port, or :port for 127.0.0.1:port) instead of stdio")
	stateless := fs.Bool("stateless", false, "with --http: serve without sessions")
	insecure := fs.Bool("insecure", false, "with --http: allow a non-loopback address without authentication (server.auth)")
	metricsAddr := fs.String("metrics-addr", "", "with --http: serve Prometheus metrics at http://`ADDR`/metrics (host:port, or :port for 127.0.0.1:port)")
	cf.storeFlag(fs)
	if code, ok := parse(env, fs, args); !ok {
		return code
	}
	if code, ok := noArgs(env, fs, "serve takes only flags"); !ok {
		return code
	}
	if *addr == "" && (*stateless || *insecure || *metricsAddr != "") {
		return env.usageError("--stateless, --insecure and --metrics-addr apply only with --http", "add --http 127.0.0.1:8080")
	}
	cfg, logger, ok := cf.load(env)
	if !ok {
		return ExitInvalid
	}
	var ln net.Listener
	if *addr != "" {
		hostport, err := listenAddr(*addr, *insecure || cfg.Server.Auth.Enabled())
		if err != nil {
			return env.usageError(err.Error(), "bind a loopback address such as 127.0.0.1:8080, configure bearer tokens (server.auth in the configuration file), or pass --insecure to accept the risk")
		}
		if ln, err = net.Listen("tcp", hostport); err != nil {
			env.errorf("listening on %s: %v", hostport, err)
			return ExitFailed
		}
		defer ln.Close()
	}
	var metricsLn net.Listener
	if *metricsAddr != "" {
		hostport, err := listenAddr(*metricsAddr, *insecure)
		if err != nil {
			return env.usageError(strings.Replace(err.Error(), "--http", "--metrics-addr", 1), "bind a loopback address such as 127.0.0.1:9464, or pass --insecure to accept the risk")
		}
		if metricsLn, err = net.Listen("tcp", hostport); err != nil {
			env.errorf("listening on %s: %v", hostport, err)
			return ExitFailed
		}
		defer metricsLn.Close()
	}
	app, ok := env.newApp(ctx, cfg, logger, server.Options{Metrics: metricsLn != nil})
	if !ok {
		return ExitInvalid
	}
	if metricsLn != nil {
		stop := serveMetrics(metricsLn, app.MetricsHandler())
		defer stop()
		fmt.Fprintf(env.stderr, "orchestra: serving metrics at http://%s/metrics\n", metricsLn.Addr())
	}
	var err error
	if ln != nil {
		fmt.Fprintf(env.stderr, "orchestra: serving MCP at http://%s/mcp\n", ln.Addr())
		err = app.ServeHTTP(ctx, ln, server.HTTPOptions{Stateless: *stateless})
	} else {
		err = app.ServeStdio(ctx, env.stdin, env.stdout)
	}
	if err != nil {
		env.errorf("%v", err)
		return ExitFailed
	}
	return ExitOK
}

// listenAddr fills in a loopback host and refuses non-loopback addresses
// unless authenticated (bearer tokens are configured) or insecure.
func listenAddr(addr string, authenticated bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("invalid --http address %q: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !authenticated && !isLoopback(host) {
		return "", fmt.Errorf("refusing to serve on %s without authentication: anyone who can reach it could run plans", net.JoinHostPort(host, port))
	}
	return net.JoinHostPort(host, port), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

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
