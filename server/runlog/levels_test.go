package runlog

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLogLevelsWanted checks that a run's lines are built for a client only
// once it asked for a level: the SDK's handler says it is enabled either
// way.
func TestLogLevelsWanted(t *testing.T) {
	var levels Levels
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}})
	srv.AddReceivingMiddleware(levels.Middleware)
	var wanted []bool
	srv.AddTool(&mcp.Tool{Name: "probe", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		wanted = append(wanted, levels.wanted(req))
		return &mcp.CallToolResult{}, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	probe := func(meta mcp.Meta) {
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{}, Meta: meta}); err != nil {
			t.Fatal(err)
		}
	}
	probe(nil)
	probe(mcp.Meta{mcp.MetaKeyLogLevel: "debug"})
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	probe(nil)
	want := []bool{false, true, true}
	for i := range want {
		if i >= len(wanted) || wanted[i] != want[i] {
			t.Fatalf("wanted = %v, want %v (no level, a level in _meta, after logging/setLevel)", wanted, want)
		}
	}
	if (&Levels{}).wanted(&mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{}}) {
		t.Error("a session of another tracker is wanted")
	}
}
