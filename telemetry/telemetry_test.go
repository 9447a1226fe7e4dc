package telemetry_test

import (
	"context"
	"testing"

	"github.com/orchestra-mcp/orchestra/telemetry"
)

// TestNothingExportedByDefault: with no OTEL_* variable set, spans are not
// recorded (the OpenTelemetry default of otlp does not apply), yet a
// caller's trace context still reaches a step's tool unchanged.
func TestNothingExportedByDefault(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	tel, err := telemetry.New(t.Context(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.MetricsHandler() != nil {
		t.Error("a metrics handler without Options.Prometheus")
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, span := tel.Tracer().Start(telemetry.ContextWithTraceparent(t.Context(), tp), "x")
	if span.IsRecording() {
		t.Error("a span is recorded with no exporter configured")
	}
	if got := telemetry.Traceparent(ctx); got != tp {
		t.Errorf("traceparent %q, want the caller's %q", got, tp)
	}
}

// TestPrometheus serves the metrics when asked to.
func TestPrometheus(t *testing.T) {
	tel, err := telemetry.New(t.Context(), telemetry.Options{Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.MetricsHandler() == nil {
		t.Fatal("no metrics handler with Options.Prometheus")
	}
}

// TestInvalidTraceparent leaves the context without a parent.
func TestInvalidTraceparent(t *testing.T) {
	ctx := telemetry.ContextWithTraceparent(t.Context(), "not-a-traceparent")
	if got := telemetry.Traceparent(ctx); got != "" {
		t.Errorf("traceparent %q from an invalid value", got)
	}
}
