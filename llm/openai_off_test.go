//go:build no_openai

package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
)

// TestOpenAIBuiltWithout: a binary built with the no_openai tag refuses the
// openai provider with an error that names the tag.
func TestOpenAIBuiltWithout(t *testing.T) {
	_, err := llm.New(llm.Config{Provider: "openai", Model: "gpt-test"}, llm.Options{Getenv: env("OPENAI_API_KEY", "sk-test")})
	if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), "built without the openai provider (build tag no_openai)") {
		t.Errorf("error = %v, want one naming the no_openai build tag", err)
	}
}
