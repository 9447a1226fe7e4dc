package server_test

import (
	"testing"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// A built-in tool's typed output is a plain JSON value by the time
// conditions and templates see it: json_query's count of 0 is falsy like
// the number 0 a downstream server sends, so the step under "when" is
// skipped, and the same count interpolates as 0.
func TestWhenOnBuiltinNumbers(t *testing.T) {
	cs := connectObs(t, appWithStore(t, "memory", nil), nil)
	_, env := servertest.Call(t, cs, map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "none", "tool": "json_query", "arguments": map[string]any{"query": ".[] | select(. > 5)", "input": []any{1, 2}}},
		map[string]any{"id": "some", "tool": "json_query", "arguments": map[string]any{"query": ".[]", "input": []any{1, 2}}},
		map[string]any{"id": "if_none", "when": "$none.output.count", "tool": "render", "arguments": map[string]any{"template": "ran"}},
		map[string]any{"id": "if_some", "when": "$some.output.count", "tool": "render", "arguments": map[string]any{"template": "ran"}},
		map[string]any{"id": "say", "tool": "render", "arguments": map[string]any{"template": "{{.n}}", "values": map[string]any{"n": "${none.output.count}/${some.output.count}"}}},
	}}}, nil)
	got := map[string]string{}
	for _, s := range env.Artifact.Steps {
		got[s.ID] = s.Status
	}
	if got["if_none"] != orchestrate.StatusSkipped || got["if_some"] != orchestrate.StatusSuccess {
		t.Errorf("when on counts 0 and 2: if_none %s (want skipped), if_some %s (want success)", got["if_none"], got["if_some"])
	}
	if out, _ := env.Artifact.Steps[4].Output.(map[string]any); out["text"] != "0/2" {
		t.Errorf("the counts interpolate as %v, want 0/2", env.Artifact.Steps[4].Output)
	}
}
