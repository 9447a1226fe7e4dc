package server_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/server"
)

// TestRedactingHandler checks every way a secret can reach a line: the
// message, strings, errors, groups, attributes named like secrets, values
// added with With, and bearer credentials nobody configured.
func TestRedactingHandler(t *testing.T) {
	var buf bytes.Buffer
	h := server.NewRedactingHandler(slog.NewTextHandler(&buf, nil), []string{"hunter2-secret"})
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
	if n := strings.Count(out, server.Redacted); n < 8 {
		t.Errorf("%d redactions, want at least 8: %s", n, out)
	}
	if !strings.Contains(out, "token=\"\"") {
		t.Errorf("an empty token should stay empty: %s", out)
	}
}

// TestSetLevelRejectsUnknownLevels checks that logging/setLevel refuses a
// level the specification does not define with invalid params, and takes
// every level it does.
func TestSetLevelRejectsUnknownLevels(t *testing.T) {
	cs := connectInMemory(t, newApp(t, nil), v20251125)
	err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "bogus"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, `"bogus"`) || !strings.Contains(rpcErr.Message, "warning") {
		t.Fatalf("setLevel bogus: err = %v; want invalid params naming the level and the valid ones", err)
	}
	for _, level := range []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"} {
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: level}); err != nil {
			t.Errorf("setLevel %s: %v", level, err)
		}
	}
}
