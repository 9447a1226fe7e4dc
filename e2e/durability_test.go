package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
)

// TestAnsweredRunsSurviveSIGKILL kills orchestra serve with SIGKILL while
// sixteen clients send it plans, and checks that every run it answered is
// in its records as finished: the answer follows the commit of the run's
// end. (Before, a kill under load lost answered runs, or left them
// running, to be marked interrupted.)
func TestAnsweredRunsSurviveSIGKILL(t *testing.T) {
	db := filepath.Join(t.TempDir(), "records.db")
	cmd := exec.Command(orchestraBin, "serve", "--store", db)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "durability", Version: "test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var (
		mu       sync.Mutex
		answered []string
		wg       sync.WaitGroup
	)
	plan := map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "one"}},
		map[string]any{"tool": "json_query", "arguments": map[string]any{"query": ". + 1", "input": 1}},
	}}}
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: plan})
				if err != nil {
					return
				}
				var env struct {
					ArtifactID string `json:"artifact_id"`
				}
				data, _ := json.Marshal(res.StructuredContent)
				if json.Unmarshal(data, &env) != nil || env.ArtifactID == "" || res.IsError {
					t.Errorf("a plan failed: %s", data)
					return
				}
				mu.Lock()
				answered = append(answered, env.ArtifactID)
				n := len(answered)
				mu.Unlock()
				if n == 300 {
					// Killed while runs are in flight and their records queued.
					_ = cmd.Process.Kill()
					stop()
				}
			}
		})
	}
	wg.Wait()
	// Closing the session waits for the killed process (the transport owns
	// cmd.Wait: calling it here too would race with it).
	_ = cs.Close()

	s, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mu.Lock()
	defer mu.Unlock()
	bad := map[string]int{}
	for _, id := range answered {
		r, _, err := s.Get(t.Context(), id)
		switch {
		case err != nil:
			bad["missing"]++
		case r.Status != store.StatusSuccess:
			bad[string(r.Status)]++
		}
	}
	if len(bad) > 0 {
		t.Errorf("of %d answered runs, the records after SIGKILL lack or misstate some: %v", len(answered), bad)
	}
}
