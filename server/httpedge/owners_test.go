package httpedge

import (
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/testutil/jwttest"
)

// TestLegacyOwners: the bare owners of records written before owners were
// namespaced get the namespace the configuration implies, and a name that
// could be a static token's or a JWT's sub keeps its bare name (no caller
// sees it; the machine's own callers still do).
func TestLegacyOwners(t *testing.T) {
	t.Setenv("ORCHESTRA_TEST_ALICE", "alice-static-token")
	named := []config.NamedToken{{Name: "alice", TokenEnv: "ORCHESTRA_TEST_ALICE"}}
	jwtCfg := &config.JWT{Issuer: jwttest.Issuer, Audience: jwttest.Audience, JWKSURL: "http://127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		auth config.Auth
		in   string
		want string // "" when left as it is
	}{
		{"static only", config.Auth{Tokens: named}, "alice", "static:alice"},
		{"static only, unknown name", config.Auth{Tokens: named}, "zoe", ""},
		{"jwt only", config.Auth{JWT: jwtCfg}, "alice", "jwt:" + jwttest.Issuer + "#alice"},
		{"both, a jwt sub", config.Auth{Tokens: named, JWT: jwtCfg}, "zoe", "jwt:" + jwttest.Issuer + "#zoe"},
		{"both, ambiguous", config.Auth{Tokens: named, JWT: jwtCfg}, "alice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := LoadTokens(tc.auth, nil, func(k string) (string, bool) { return "alice-static-token", k == "ORCHESTRA_TEST_ALICE" })
			if err != nil {
				t.Fatal(err)
			}
			got, ok := ts.LegacyOwner(tc.in)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("LegacyOwner(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
			}
		})
	}
}
