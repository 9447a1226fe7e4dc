package httpedge

import (
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
)

// TestTokenFileDevZero: a token file is read through the configuration's
// file limit, so that /dev/zero fails at once with the reason.
func TestTokenFileDevZero(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for name, cfg := range map[string]config.Auth{
		"tokens_file":         {TokensFile: "/dev/zero"},
		"tokens[].token_file": {Tokens: []config.NamedToken{{Name: "ci", TokenFile: "/dev/zero"}}},
	} {
		if _, err := LoadTokens(cfg, nil, none); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("%s /dev/zero: %v, want it refused as larger than the limit", name, err)
		}
	}
}
