package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The exporters the OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER
// variables may name, as the OpenTelemetry specification spells them.
const (
	exporterOTLP       = "otlp"
	exporterConsole    = "console"
	exporterPrometheus = "prometheus"
	exporterNone       = "none"
)

// otlpProtocol is the OTLP transport for a signal: the signal's own
// OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf. Only http/protobuf is built in; gRPC would link a
// second RPC stack for what the collector's OTLP/HTTP port serves as well.
func otlpProtocol(getenv func(string) string, signal string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	proto := getenv(name)
	if proto == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		proto = getenv(name)
	}
	switch proto {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "", fmt.Errorf("%s=grpc: orchestra exports OTLP over HTTP only; set it to http/protobuf and point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's OTLP/HTTP port (4318 by default)", name)
	default:
		return "", fmt.Errorf("%s=%q is not an OTLP protocol orchestra speaks: use http/protobuf", name, proto)
	}
}

// newSpanExporter returns the exporter name stands for. The console
// exporters write to stderr: stdout carries the MCP messages of a stdio
// server.
func newSpanExporter(ctx context.Context, name string, getenv func(string) string) (sdktrace.SpanExporter, error) {
	switch name {
	case exporterOTLP:
		if _, err := otlpProtocol(getenv, "TRACES"); err != nil {
			return nil, err
		}
		return otlptracehttp.New(ctx)
	case exporterConsole:
		return stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	}
	return nil, fmt.Errorf("unknown exporter %q: want %s, %s or %s", name, exporterOTLP, exporterConsole, exporterNone)
}

// newMetricReader returns the reader name stands for. The prometheus
// reader serves /metrics on OTEL_EXPORTER_PROMETHEUS_HOST and
// OTEL_EXPORTER_PROMETHEUS_PORT (localhost:9464 by default) until it is
// shut down.
func newMetricReader(ctx context.Context, name string, getenv func(string) string, log *slog.Logger) (sdkmetric.Reader, error) {
	switch name {
	case exporterOTLP:
		if _, err := otlpProtocol(getenv, "METRICS"); err != nil {
			return nil, err
		}
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, err
		}
		return sdkmetric.NewPeriodicReader(exp), nil
	case exporterConsole:
		exp, err := stdoutmetric.New(stdoutmetric.WithWriter(os.Stderr))
		if err != nil {
			return nil, err
		}
		return sdkmetric.NewPeriodicReader(exp), nil
	case exporterPrometheus:
		return newPrometheusServer(ctx, getenv, log)
	}
	return nil, fmt.Errorf("unknown exporter %q: want %s, %s, %s or %s", name, exporterOTLP, exporterConsole, exporterPrometheus, exporterNone)
}

// newPrometheusReader returns a Prometheus reader on a registry of its own
// and the handler that serves it.
func newPrometheusReader() (sdkmetric.Reader, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exp, err := promexporter.New(promexporter.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	return exp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}

// promServer is a Prometheus reader that stops its HTTP server when it is
// shut down.
type promServer struct {
	sdkmetric.Reader
	srv *http.Server
}

func (p promServer) Shutdown(ctx context.Context) error {
	return errors.Join(p.Reader.Shutdown(ctx), p.srv.Shutdown(ctx))
}

func newPrometheusServer(ctx context.Context, getenv func(string) string, log *slog.Logger) (sdkmetric.Reader, error) {
	reader, handler, err := newPrometheusReader()
	if err != nil {
		return nil, err
	}
	host, port := getenv("OTEL_EXPORTER_PROMETHEUS_HOST"), getenv("OTEL_EXPORTER_PROMETHEUS_PORT")
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "9464"
	}
	addr := net.JoinHostPort(host, port)
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("listening on %s for Prometheus (OTEL_EXPORTER_PROMETHEUS_HOST, OTEL_EXPORTER_PROMETHEUS_PORT): %w", addr, err), reader.Shutdown(ctx))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the Prometheus metrics server stopped", "addr", addr, "error", err)
		}
	}()
	return promServer{reader, srv}, nil
}

// exporterName is the value of the variable key, lower-cased; "" and
// "none" both mean no exporter.
func exporterName(getenv func(string) string, key string) string {
	name := strings.ToLower(strings.TrimSpace(getenv(key)))
	if name == exporterNone {
		return ""
	}
	return name
}
