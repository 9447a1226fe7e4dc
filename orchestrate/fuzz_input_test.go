package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// fuzzEngine returns an engine over no-op tools: echo (typed input and
// output schemas), free (no schemas), fail and boom (which panics), with
// short timeouts so that no input can make a fuzz run slow.
func fuzzEngine(t testing.TB) *Engine {
	echo := fakeTool(t, "echo",
		`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"},"items":{"type":"array"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"},"items":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"}}}}}}`,
		func(_ context.Context, args map[string]any) (*registry.Result, error) { return structured(args), nil })
	free := fakeTool(t, "free", "", "", func(_ context.Context, args map[string]any) (*registry.Result, error) {
		return &registry.Result{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	fail := fakeTool(t, "fail", "", "", func(context.Context, map[string]any) (*registry.Result, error) {
		return nil, errors.New("failing as asked")
	})
	boom := fakeTool(t, "boom", "", "", func(context.Context, map[string]any) (*registry.Result, error) {
		panic("boom")
	})
	return NewEngine(Options{
		// The whole envelope, whose step paths the lifecycle check reads.
		Response:  ResponseFull,
		Tools:     registry.NewCatalog(echo, free, fail, boom),
		Limits:    Limits{StepTimeout: 200 * time.Millisecond, PlanTimeout: time.Second, MaxSteps: 20},
		Forbidden: func(name string) bool { return name == ToolName },
	})
}

// FuzzOrchestrate fuzzes the tool's whole input path, as a client reaches
// it: the arguments of a tools/call go through the handler's size check,
// decoding, validation, template resolution and execution against no-op
// tools. Whatever the input, the handler answers with an envelope (never a
// panic or a protocol error), isError agrees with the envelope, every
// error has a code and a message, the envelope encodes as JSON, the state
// machine refuses no event, and the hooks see every step of the envelope
// end exactly once (checkLifecycle).
func FuzzOrchestrate(f *testing.F) {
	f.Add([]byte(`{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"text":"hi","items":[{"url":"u"}]}},{"tool":"echo","arguments":{"text":"${a.output.text}!","n":"$bindings.n"}}]},"bindings":{"n":3}}`))
	f.Add([]byte(`{"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"items":[{"ok":true},{"ok":false}]}},{"id":"r","for_each":"$a.output.items","do":{"when":"$item.ok","tool":"echo","arguments":{"i":"$item_index"}}},{"when":"$r.output[0]","tool":"echo","arguments":{"all":"$r.output"}}]}}`))
	f.Add([]byte(`{"plan":{"steps":[{"for_each":[1,2,3],"as":"n","do":{"parallel":[{"tool":"echo","arguments":{"n":"${n}"}}]}}]}}`))
	f.Add([]byte(`{"client_tools":[{"name":"edit","output_schema":{"type":"object"}}],"plan":{"steps":[{"id":"a","tool":"echo","arguments":{"text":"hi"}},{"id":"g","parallel":[{"id":"e","tool":"edit","arguments":{"t":"$a.output.text"}},{"tool":"echo","arguments":{"text":"x"}}]}]}}`))
	f.Add([]byte(`{"resume":{"exec_id":"x","results":{"e":{"error":"no"}}}}`))
	e := fuzzEngine(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := &pathRecorder{}
		h := e.With(RunOptions{Hooks: rec.lifecycle(t)}).Handler(HandlerOptions{MaxRequestBytes: 1 << 20})
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolName, Arguments: json.RawMessage(data)}}
		res, err := h(t.Context(), req)
		if err != nil {
			t.Fatalf("the handler returned a protocol error for %q: %v", data, err)
		}
		raw, ok := res.StructuredContent.(json.RawMessage)
		if !ok {
			t.Fatalf("no envelope for %q: %#v", data, res.StructuredContent)
		}
		env := new(Envelope)
		if err := json.Unmarshal(raw, env); err != nil || env.Artifact == nil {
			t.Fatalf("the structured content of %q is no envelope (%v): %s", data, err, raw)
		}
		if res.IsError != (!env.Artifact.Success && env.Artifact.Status != StatusAwaitingClient) {
			t.Fatalf("isError = %v but success = %v for %q", res.IsError, env.Artifact.Success, data)
		}
		if _, err := json.Marshal(env); err != nil {
			t.Fatalf("the envelope of %q does not encode: %v", data, err)
		}
		for _, is := range env.Artifact.ValidationErrors {
			if is.Code == "" || is.Message == "" {
				t.Fatalf("validation error without code or message for %q: %+v", data, is)
			}
		}
		if env.Artifact.Success && len(env.Artifact.ValidationErrors) > 0 {
			t.Fatalf("a successful run with validation errors for %q", data)
		}
		for _, e := range env.Artifact.Errors {
			if e.Code == "" || e.Message == "" {
				t.Fatalf("error without code or message for %q: %+v", data, e)
			}
		}
		if len(env.Artifact.ValidationErrors) > MaxIssues+1 {
			t.Fatalf("%d validation errors; want at most %d", len(env.Artifact.ValidationErrors), MaxIssues+1)
		}
		if r, _ := DecodeRequest(data); r != nil && r.Response == ResponseCompact {
			return // a compact envelope has no step paths to check the hooks against
		}
		checkLifecycle(t, env, rec.calls())
	})
}
