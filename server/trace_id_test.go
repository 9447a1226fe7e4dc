package server_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/telemetry"
)

// TestTraceIDWithTracing: with tracing on and no traceparent from the
// caller, the envelope's trace_id is the trace of the run's spans.
func TestTraceIDWithTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(t.Context(), telemetry.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	if err != nil {
		t.Fatal(err)
	}
	p := &probe{}
	app, err := server.New(t.Context(), config.Default(), server.Options{Telemetry: tel, Tools: []registry.Tool{p.tool(t, "probe")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectObs(t, app, nil)
	_, env := callPlan(t, cs, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: probePlan("probe", "x")})
	traceID, _ := env["_metadata"].(map[string]any)["trace_id"].(string)
	if len(traceID) != 32 {
		t.Fatalf("trace_id = %q, want the run's trace", traceID)
	}
	for _, s := range exp.GetSpans() {
		if s.Name == "orchestrate" && s.SpanContext.TraceID().String() != traceID {
			t.Errorf("the run's span is in trace %s, the envelope says %s", s.SpanContext.TraceID(), traceID)
		}
	}
}
