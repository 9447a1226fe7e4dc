package builtin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry"
)

// decodeArgs decodes JSON arguments the way they arrive from a client:
// numbers as json.Number when useNumber is set, else float64.
func decodeArgs(t *testing.T, s string, useNumber bool) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if useNumber {
		dec.UseNumber()
	}
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding arguments %s: %v", s, err)
	}
	return m
}

// call invokes tool with JSON arguments.
func call(t *testing.T, tool registry.Tool, args string) (*registry.Result, error) {
	t.Helper()
	return tool.Invoke(t.Context(), &registry.CallRequest{Arguments: decodeArgs(t, args, false)})
}

// roundTrip returns v as it reads after JSON encoding and decoding, so that
// tests compare outputs independent of Go number types.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshalling %v: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantToolError checks that res is a tool error whose text contains every
// fragment.
func wantToolError(t *testing.T, res *registry.Result, err error, fragments ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("got error %v, want a tool-error result", err)
	}
	if !res.IsError {
		t.Fatalf("got success %v, want a tool error", res.Output())
	}
	for _, f := range fragments {
		if !strings.Contains(res.Text(), f) {
			t.Errorf("tool error %q does not contain %q", res.Text(), f)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}
