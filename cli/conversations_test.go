package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/store"
)

// TestConversationsCommand: orchestra conversations lists every caller's
// conversations, shows one's turns oldest first, and clears one.
func TestConversationsCommand(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	db := filepath.Join(t.TempDir(), "orchestra.db")
	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tu := range []struct {
		owner, goal string
	}{{"static:alice", "first goal"}, {"static:alice", "second goal"}, {"static:bob", "bob's goal"}} {
		if err := st.AppendTurn(t.Context(), store.ConversationKey{Owner: tu.owner, ContextID: "trip-1"}, store.Turn{Goal: tu.goal, Answer: "answer to " + tu.goal}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	code, stdout, stderr := runPlannerCLI(t, "", "conversations", "--store", db)
	if code != 0 || !strings.Contains(stdout, "static:alice") || !strings.Contains(stdout, "static:bob") || strings.Count(stdout, "trip-1") != 2 {
		t.Errorf("list exited %d:\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runPlannerCLI(t, "", "conversations", "--store", db, "--owner", "static:alice", "show", "trip-1")
	if i, j := strings.Index(stdout, "first goal"), strings.Index(stdout, "second goal"); code != 0 || i < 0 || j < i || strings.Contains(stdout, "bob") {
		t.Errorf("show exited %d:\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = runPlannerCLI(t, "", "conversations", "--store", db, "--owner", "static:bob", "clear", "trip-1")
	if code != 0 || !strings.Contains(stderr, "cleared 1 turns") {
		t.Errorf("clear exited %d: %s", code, stderr)
	}
	if code, _, stderr := runPlannerCLI(t, "", "conversations", "--store", db, "show"); code == 0 || !strings.Contains(stderr, "context id") {
		t.Errorf("show without an id exited %d: %s", code, stderr)
	}
}
