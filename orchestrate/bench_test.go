package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orchestra-mcp/orchestra/registry"
)

// noopCatalog has one typed tool that returns at once.
func noopCatalog(b testing.TB) *registry.Catalog {
	out := map[string]any{"id": "x", "count": 1.0, "items": []any{"a"}}
	return registry.NewCatalog(fakeTool(b, "noop",
		`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"},"note":{"type":"string"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"id":{"type":"string"},"count":{"type":"integer"},"items":{"type":"array","items":{"type":"string"}}}}`,
		func(ctx context.Context, args map[string]any) (*registry.Result, error) {
			return structured(out), nil
		}))
}

// chainPlan is n noop steps, each but the first using the one before it:
// a whole-value reference, an integer reference and an interpolation.
func chainPlan(b testing.TB, n int) *Request {
	var steps []string
	for i := range n {
		if i == 0 {
			steps = append(steps, `{"id":"s0","tool":"noop","arguments":{"id":"start","n":1}}`)
			continue
		}
		steps = append(steps, fmt.Sprintf(`{"id":"s%d","tool":"noop","arguments":{"id":"$s%d.output.id","n":"$s%d.output.count","note":"after ${s%d.output.items[0]}"}}`, i, i-1, i-1, i-1))
	}
	return mustRequest(b, `{"plan":{"steps":[`+strings.Join(steps, ",")+`]}}`)
}

func BenchmarkValidate12(b *testing.B) {
	e := NewEngine(Options{Tools: noopCatalog(b)})
	req := chainPlan(b, 12)
	b.ReportAllocs()
	for b.Loop() {
		if v := e.Validate(req); !v.OK() {
			b.Fatalf("invalid: %v", v.Errors[0])
		}
	}
}

func BenchmarkExecute12(b *testing.B) {
	e := NewEngine(Options{Tools: noopCatalog(b)})
	req := chainPlan(b, 12)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if env := e.Run(ctx, req); !env.Artifact.Success {
			b.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
		}
	}
}

// BenchmarkExecuteN runs chains of 1 to 1000 steps, with the step limit
// raised to fit.
func BenchmarkExecuteN(b *testing.B) {
	for _, n := range []int{1, 12, 100, 1000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			e := NewEngine(Options{Tools: noopCatalog(b), Limits: Limits{MaxSteps: n, MaxTemplates: 4 * n}})
			req := chainPlan(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if env := e.Run(ctx, req); !env.Artifact.Success {
					b.Fatalf("status %s: %v", env.Artifact.Status, env.Artifact.Errors)
				}
			}
		})
	}
}

// BenchmarkHandler1Step is one agent_orchestrate call of a one-step plan
// through the MCP handler, its result encoded as the SDK sends it: the
// engine's whole share of the smallest request.
func BenchmarkHandler1Step(b *testing.B) {
	h := NewEngine(Options{Tools: noopCatalog(b)}).Handler(HandlerOptions{})
	args := json.RawMessage(`{"plan":{"steps":[{"id":"s0","tool":"noop","arguments":{"id":"start","n":1}}]}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolName, Arguments: args}}
		res, err := h(ctx, req)
		if err != nil || res.IsError {
			b.Fatalf("err %v, isError %v", err, res.IsError)
		}
		if _, err := json.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}
