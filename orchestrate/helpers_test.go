package orchestrate

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/orchestra-mcp/orchestra/registry"
)

// fakeTool builds a tool from a function and schemas written as JSON.
func fakeTool(t testing.TB, name, in, out string, call func(ctx context.Context, args map[string]any) (*registry.Result, error)) registry.Tool {
	t.Helper()
	tool := registry.Tool{Name: name, Description: "test tool " + name, Source: "test"}
	if in == "" {
		in = `{"type":"object"}`
	}
	tool.InputSchema = mustSchema(t, in)
	if out != "" {
		tool.OutputSchema = mustSchema(t, out)
	}
	tool.Call = func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
		return call(ctx, req.Arguments)
	}
	return tool
}

func mustSchema(t testing.TB, s string) *jsonschema.Schema {
	t.Helper()
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return &sc
}

func structured(v any) *registry.Result { return &registry.Result{Structured: v} }

// callLog records tool calls.
type callLog struct {
	mu    sync.Mutex
	calls []string
	args  map[string][]map[string]any
}

func (l *callLog) add(name string, args map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, name)
	if l.args == nil {
		l.args = map[string][]map[string]any{}
	}
	l.args[name] = append(l.args[name], args)
}

func (l *callLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func mustRequest(t testing.TB, js string) *Request {
	t.Helper()
	req, issues := DecodeRequest([]byte(js))
	if len(issues) > 0 {
		data, _ := json.MarshalIndent(issues, "", "  ")
		t.Fatalf("decoding %s:\n%s", js, data)
	}
	return req
}
