package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/telemetry"
)

// clearOTel unsets every OTEL_* variable these tests read.
func clearOTel(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_PORT"} {
		t.Setenv(k, "")
	}
}

// TestOTLPOverHTTP: OTEL_TRACES_EXPORTER=otlp sends spans as OTLP
// protobuf over HTTP to OTEL_EXPORTER_OTLP_ENDPOINT.
func TestOTLPOverHTTP(t *testing.T) {
	clearOTel(t)
	var mu sync.Mutex
	var paths, types []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths, types = append(paths, r.URL.Path), append(types, r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	tel, err := telemetry.New(t.Context(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer().Start(t.Context(), "run")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "/v1/traces" || types[0] != "application/x-protobuf" {
		t.Errorf("collector got %v with content types %v, want one POST of /v1/traces as application/x-protobuf", paths, types)
	}
}

// TestExporterErrors: a gRPC protocol or an unknown exporter is refused
// with an error that says what to set instead.
func TestExporterErrors(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			[]string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "http/protobuf", "4318"}},
		{map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
			[]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=grpc", "http/protobuf"}},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			[]string{`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json"`, "use http/protobuf"}},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			[]string{"OTEL_TRACES_EXPORTER", `unknown exporter "zipkin"`, "otlp, console or none"}},
		{map[string]string{"OTEL_METRICS_EXPORTER": "statsd"},
			[]string{"OTEL_METRICS_EXPORTER", `unknown exporter "statsd"`, "prometheus"}},
	} {
		clearOTel(t)
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		tel, err := telemetry.New(t.Context(), telemetry.Options{})
		if err == nil {
			tel.Shutdown(context.Background())
			t.Errorf("%v: no error", tt.env)
			continue
		}
		for _, s := range tt.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%v: error %q does not contain %q", tt.env, err, s)
			}
		}
	}
}

// TestConsoleAndNone: console exporters record; none and an unset variable
// record nothing.
func TestConsoleAndNone(t *testing.T) {
	for _, tt := range []struct {
		exporter  string
		recording bool
	}{{"console", true}, {"none", false}, {"", false}} {
		clearOTel(t)
		t.Setenv("OTEL_TRACES_EXPORTER", tt.exporter)
		t.Setenv("OTEL_METRICS_EXPORTER", tt.exporter)
		tel, err := telemetry.New(t.Context(), telemetry.Options{})
		if err != nil {
			t.Fatalf("%q: %v", tt.exporter, err)
		}
		_, span := tel.Tracer().Start(t.Context(), "run")
		if span.IsRecording() != tt.recording {
			t.Errorf("%q: span recording = %v, want %v", tt.exporter, span.IsRecording(), tt.recording)
		}
		span.End()
		tel.Shutdown(context.Background())
	}
}

// TestPrometheusExporterServes: OTEL_METRICS_EXPORTER=prometheus serves
// /metrics on OTEL_EXPORTER_PROMETHEUS_HOST:PORT until shutdown.
func TestPrometheusExporterServes(t *testing.T) {
	clearOTel(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", port)
	tel, err := telemetry.New(t.Context(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "target_info") {
		t.Errorf("GET /metrics: %s\n%s", resp.Status, body)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://127.0.0.1:" + port + "/metrics"); err == nil {
		t.Error("/metrics still served after Shutdown")
	}
}
