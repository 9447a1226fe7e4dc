package secrets_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/server/secrets"
)

// TestHandler checks every way a secret can reach a line: the
// message, strings, errors, groups, attributes named like secrets, values
// added with With, and bearer credentials nobody configured.
func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	h := secrets.NewHandler(slog.NewTextHandler(&buf, nil), []string{"hunter2-secret"})
	log := slog.New(h).With("ctx", "with hunter2-secret")
	log.Info("message hunter2-secret",
		"s", "a hunter2-secret b",
		"err", errors.New("failed: hunter2-secret"),
		slog.Group("g", "inner", "hunter2-secret"),
		"password", "plain",
		"Authorization", "whatever",
		"note", "sent Bearer abcdefghijk to the server",
		"list", []string{"x", "hunter2-secret"},
		"token", "",
	)
	out := buf.String()
	for _, leak := range []string{"hunter2-secret", "plain", "whatever", "abcdefghijk"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q leaked: %s", leak, out)
		}
	}
	if n := strings.Count(out, secrets.Redacted); n < 8 {
		t.Errorf("%d redactions, want at least 8: %s", n, out)
	}
	if !strings.Contains(out, "token=\"\"") {
		t.Errorf("an empty token should stay empty: %s", out)
	}
}
