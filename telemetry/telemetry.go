package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// ScopeName is the instrumentation scope of orchestra's spans and metrics.
const ScopeName = "github.com/orchestra-mcp/orchestra"

// Options configure [New].
type Options struct {
	// TracerProvider, when set, is used instead of the exporter the
	// environment names (tests pass an SDK provider with an in-memory
	// exporter).
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, is used instead of the readers the
	// environment and Prometheus ask for.
	MeterProvider metric.MeterProvider
	// Prometheus adds a Prometheus reader; MetricsHandler serves it.
	Prometheus bool
	// Version is the service.version of the resource.
	Version string
	// Logger receives errors of the exporters; nil discards them.
	Logger *slog.Logger
}

// Telemetry makes spans and metrics of runs. Its methods are safe for
// concurrent use. The zero value is not usable; see [New].
type Telemetry struct {
	tracer  trace.Tracer
	meter   metric.Meter
	prom    http.Handler
	enabled bool // spans are recorded somewhere
	log     *slog.Logger

	orchestrations  metric.Int64Counter
	steps           metric.Int64Counter
	stepDuration    metric.Float64Histogram
	planDuration    metric.Float64Histogram
	depthRejections metric.Int64Counter
	plannerAttempts metric.Int64Counter

	mu    sync.Mutex
	runs  map[*orchestrate.RunInfo]*runSpans
	known orchestrate.Tools // the catalog whose names label metrics (Tools)

	shutdown []func(context.Context) error
}

// Disabled returns a Telemetry that records and exports nothing but still
// carries the caller's trace context to downstream servers.
func Disabled() *Telemetry {
	t, err := New(context.Background(), Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	if err != nil {
		panic("telemetry: " + err.Error()) // no exporter to fail
	}
	return t
}

// New sets up traces and metrics from the OTEL_* environment variables and
// opts. Nothing is exported unless OTEL_TRACES_EXPORTER or
// OTEL_METRICS_EXPORTER names an exporter (or opts asks for Prometheus);
// OTEL_SDK_DISABLED=true turns both off.
func New(ctx context.Context, opts Options) (*Telemetry, error) {
	t := &Telemetry{log: opts.Logger, runs: map[*orchestrate.RunInfo]*runSpans{}}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	disabled := strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true")
	var res *resource.Resource
	newResource := func() (*resource.Resource, error) {
		if res != nil {
			return res, nil
		}
		attrs := []attribute.KeyValue{attribute.String("service.name", "orchestra")}
		if opts.Version != "" {
			attrs = append(attrs, attribute.String("service.version", opts.Version))
		}
		r, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
		if err != nil && r == nil {
			return nil, err
		}
		res = r
		return res, nil
	}

	tp := opts.TracerProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
		if name := exporterName(os.Getenv, "OTEL_TRACES_EXPORTER"); !disabled && name != "" {
			exp, err := newSpanExporter(ctx, name, os.Getenv)
			if err != nil {
				return nil, fmt.Errorf("setting up the %s trace exporter (OTEL_TRACES_EXPORTER): %w", name, err)
			}
			r, err := newResource()
			if err != nil {
				return nil, fmt.Errorf("describing the service for traces: %w", err)
			}
			sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(r))
			t.shutdown = append(t.shutdown, sdk.Shutdown)
			tp = sdk
		}
	}
	_, noop := tp.(tracenoop.TracerProvider)
	t.enabled = !noop

	mp := opts.MeterProvider
	if mp == nil {
		var readers []sdkmetric.Reader
		if name := exporterName(os.Getenv, "OTEL_METRICS_EXPORTER"); !disabled && name != "" {
			r, err := newMetricReader(ctx, name, os.Getenv, t.log)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("setting up the %s metric exporter (OTEL_METRICS_EXPORTER): %w", name, err), t.Shutdown(ctx))
			}
			readers = append(readers, r)
		}
		if opts.Prometheus {
			exp, handler, err := newPrometheusReader()
			if err != nil {
				return nil, errors.Join(fmt.Errorf("setting up the Prometheus exporter: %w", err), t.Shutdown(ctx))
			}
			readers = append(readers, exp)
			t.prom = handler
		}
		if len(readers) == 0 {
			mp = metricnoop.NewMeterProvider()
		} else {
			r, err := newResource()
			if err != nil {
				return nil, errors.Join(fmt.Errorf("describing the service for metrics: %w", err), t.Shutdown(ctx))
			}
			mopts := []sdkmetric.Option{sdkmetric.WithResource(r)}
			for _, rd := range readers {
				mopts = append(mopts, sdkmetric.WithReader(rd))
			}
			sdk := sdkmetric.NewMeterProvider(mopts...)
			t.shutdown = append(t.shutdown, sdk.Shutdown)
			mp = sdk
		}
	}

	t.tracer = tp.Tracer(ScopeName)
	t.meter = mp.Meter(ScopeName)
	if err := t.instruments(); err != nil {
		return nil, errors.Join(err, t.Shutdown(ctx))
	}
	return t, nil
}

func (t *Telemetry) instruments() error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	t.orchestrations, err = t.meter.Int64Counter("orchestra.orchestrations",
		metric.WithDescription("Orchestrations that ended, by status and source."), metric.WithUnit("{orchestration}"))
	add(err)
	t.steps, err = t.meter.Int64Counter("orchestra.steps",
		metric.WithDescription("Steps of orchestrations, by final status, tool and type (tool or parallel)."), metric.WithUnit("{step}"))
	add(err)
	t.stepDuration, err = t.meter.Float64Histogram("orchestra.step.duration",
		metric.WithDescription("How long steps that started took, by status and tool."), metric.WithUnit("s"))
	add(err)
	t.planDuration, err = t.meter.Float64Histogram("orchestra.plan.duration",
		metric.WithDescription("How long whole orchestrations took, planning included, by status."), metric.WithUnit("s"))
	add(err)
	t.depthRejections, err = t.meter.Int64Counter("orchestra.depth.rejections",
		metric.WithDescription("Orchestrations refused because they were nested max_depth deep."), metric.WithUnit("{orchestration}"))
	add(err)
	t.plannerAttempts, err = t.meter.Int64Counter("orchestra.planner.attempts",
		metric.WithDescription("Plans the planner asked a model for: first answers and repairs."), metric.WithUnit("{attempt}"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("creating metric instruments: %w", err)
	}
	return nil
}

// MetricsHandler serves the metrics in the Prometheus text format; nil
// unless Options.Prometheus was set.
func (t *Telemetry) MetricsHandler() http.Handler { return t.prom }

// Tracer returns the tracer of orchestra's spans.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// Shutdown flushes and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}

// propagator reads and writes W3C traceparent values.
var propagator = propagation.TraceContext{}

// ContextWithTraceparent returns ctx with the remote span context of a W3C
// traceparent value as the parent of the spans started under it. An invalid
// value leaves ctx as it is.
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Traceparent returns the W3C traceparent value of the span in ctx, or ""
// when ctx has no valid span context.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Tracing reports whether spans are recorded somewhere.
func (t *Telemetry) Tracing() bool { return t.enabled }
