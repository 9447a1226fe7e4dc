package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/config"
)

// TestReadmeConversationsExample: the configuration the README's section
// on conversations and idempotent calls shows loads, and sets what it says.
func TestReadmeConversationsExample(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), "<!-- example: conversations -->\n```yaml\n")
	if !ok {
		t.Fatal("README.md has no conversations example")
	}
	example, _, _ := strings.Cut(after, "```")
	cfg, err := config.Parse([]byte(example), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the README's conversations example does not load: %v\n%s", err, example)
	}
	r := cfg.Store.Retention
	if cfg.Limits.IdempotencyTTL != 24*time.Hour || r.ConversationMaxAge.D() != 720*time.Hour || r.ConversationTurns != 200 || cfg.Planner.ContextTokens != 2000 {
		t.Errorf("the example loads as idempotency_ttl %v, conversation_max_age %v, conversation_turns %d, context_tokens %d",
			cfg.Limits.IdempotencyTTL, r.ConversationMaxAge.D(), r.ConversationTurns, cfg.Planner.ContextTokens)
	}
}
