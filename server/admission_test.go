package server_test

import (
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestAdmissionRefusesOverMemory: a server whose live heap is already over
// limits.max_memory_bytes refuses a new plan with busy, naming the limit,
// before it runs anything.
func TestAdmissionRefusesOverMemory(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxMemoryBytes = 1 << 20 // below any Go test process's heap
	cfg.Limits.MaxRunBytes = 64 << 10
	app := newApp(t, cfg)
	cs := connectInMemory(t, app, v20251125)
	res, env := servertest.Call(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "x"}}}}}, nil)
	if !res.IsError || len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != orchestrate.CodeBusy ||
		!strings.Contains(env.Artifact.ValidationErrors[0].Message, "limits.max_memory_bytes") {
		t.Errorf("want busy naming limits.max_memory_bytes, got %+v", env.Artifact)
	}
}
