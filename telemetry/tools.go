package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

// Tools wraps a catalog so that every call of one of its tools by the engine
// has a span, a child of the step's: kind client, named after the MCP
// method, for the tools of downstream servers; internal for built-in tools.
//
// The names of tools is also the set metrics label steps with: a step of
// any other tool (a client tool, whose name its caller chose, or an
// unknown one) is counted under the tool "other", so that no caller can
// grow the metrics' series.
func (t *Telemetry) Tools(tools orchestrate.Tools) orchestrate.Tools {
	t.mu.Lock()
	t.known = tools
	t.mu.Unlock()
	return tracedTools{tools, t}
}

// OtherTool labels the metrics of steps whose tool is not in the catalog.
const OtherTool = "other"

// toolLabel returns the metric label of the tool name.
func (t *Telemetry) toolLabel(name string) string {
	t.mu.Lock()
	known := t.known
	t.mu.Unlock()
	if known != nil {
		if _, ok := known.Lookup(name); ok {
			return name
		}
	}
	return OtherTool
}

type tracedTools struct {
	orchestrate.Tools
	t *Telemetry
}

// Lookup returns the tool with its call traced.
func (tt tracedTools) Lookup(name string) (registry.Tool, bool) {
	tool, ok := tt.Tools.Lookup(name)
	if !ok || tool.Call == nil || !tt.t.enabled {
		return tool, ok
	}
	call := tool.Call
	tracer := tt.t.tracer
	tool.Call = func(ctx context.Context, req *registry.CallRequest) (res *registry.Result, err error) {
		name, kind := "tool "+tool.Name, trace.SpanKindInternal
		attrs := trace.WithAttributes(AttrTool.String(tool.Name))
		if tool.Source != "" && tool.Source != "builtin" {
			name, kind = "tools/call "+tool.Name, trace.SpanKindClient
			attrs = trace.WithAttributes(AttrTool.String(tool.Name), AttrServer.String(tool.Source), AttrMCPMethod.String("tools/call"))
		}
		ctx, sp := tracer.Start(ctx, name, trace.WithSpanKind(kind), attrs)
		defer func() {
			if v := recover(); v != nil {
				sp.SetStatus(codes.Error, "panic")
				sp.End()
				panic(v)
			}
			switch {
			case err != nil:
				sp.RecordError(err)
				sp.SetStatus(codes.Error, err.Error())
			case res != nil && res.IsError:
				sp.SetStatus(codes.Error, "the tool reported an error")
			}
			sp.End()
		}()
		return call(ctx, req)
	}
	return tool, true
}
