// Package telemetry gives orchestra's runs OpenTelemetry traces and metrics.
//
// A [Telemetry] turns the lifecycle of the plan engine's runs — the
// orchestrate.Hooks it is given — into a span per orchestration, per planner
// call and per step, with a span per tool call beneath each step, and into
// metrics: orchestrations and steps by status, step and plan durations,
// depth rejections and planner attempts. The trace continues the W3C trace
// context a run was called with (the traceparent of the MCP request's
// _meta), and a step's tool is called with the step span's traceparent, so a
// downstream server's spans join the same trace.
//
// Exporters are chosen by the standard OTEL_* environment variables:
// OTEL_TRACES_EXPORTER (otlp, console, none) and OTEL_METRICS_EXPORTER
// (otlp, console, prometheus, none); OTLP goes over HTTP with protobuf
// (OTEL_EXPORTER_OTLP_PROTOCOL=grpc is refused with an error that says so),
// configured by OTEL_EXPORTER_OTLP_ENDPOINT and the rest; console writes to
// stderr; prometheus serves /metrics on OTEL_EXPORTER_PROMETHEUS_HOST and
// OTEL_EXPORTER_PROMETHEUS_PORT. Nothing is exported while the variables are
// unset. Options.Prometheus adds a Prometheus reader whose metrics
// [Telemetry.MetricsHandler] serves.
//
//	tel, err := telemetry.New(ctx, telemetry.Options{Prometheus: true})
//	if err != nil {
//		return err
//	}
//	defer tel.Shutdown(context.Background())
//	engine := orchestrate.NewEngine(orchestrate.Options{
//		Tools:       tel.Tools(catalog),
//		Hooks:       tel.Hooks(),
//		StepContext: tel.StepContext,
//	})
//	http.Handle("/metrics", tel.MetricsHandler())
package telemetry
