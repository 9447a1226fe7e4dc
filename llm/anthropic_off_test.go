//go:build no_anthropic

package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
)

// TestAnthropicBuiltWithout: a binary built with the no_anthropic tag refuses the
// openai provider with an error that names the tag.
func TestAnthropicBuiltWithout(t *testing.T) {
	_, err := llm.New(llm.Config{Provider: "anthropic", Model: "claude-test"}, llm.Options{Getenv: env("ANTHROPIC_API_KEY", "sk-ant-test")})
	if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), "built without the anthropic provider (build tag no_anthropic)") {
		t.Errorf("error = %v, want one naming the no_anthropic build tag", err)
	}
}
