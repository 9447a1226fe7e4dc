package httpedge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
)

// TestTenantRateLimit: a tenant's rate_limit is one bucket for all its
// callers, on top of each caller's own limit, refused with 429, a
// Retry-After and a message naming the tenant; another tenant is not held
// back; the bucket refills with time (an injected clock: no sleeps).
func TestTenantRateLimit(t *testing.T) {
	secrets := map[string]string{"ALICE": "alice-secret", "CAROL": "carol-secret", "BOB": "bob-secret"}
	tokens, err := LoadTokens(config.Auth{Tokens: []config.NamedToken{
		{Name: "alice", TokenEnv: "ALICE"}, {Name: "carol", TokenEnv: "CAROL"}, {Name: "bob", TokenEnv: "BOB"},
	}}, nil, func(k string) (string, bool) { v, ok := secrets[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	tenants := map[string]config.Tenant{
		"a": {Match: config.TenantMatch{Tokens: []string{"alice", "carol"}}, RateLimit: &config.RateLimit{RequestsPerSecond: 1, Burst: 3}},
		"b": {Match: config.TenantMatch{Tokens: []string{"bob"}}},
	}
	tokens.tenants = tenancy.NewTable(tenants)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	perClient := NewRateLimiter(1, 2)
	perClient.now = clock
	served := 0
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ })
	h := tokens.RequireToken(perClient.Limit(NewTenantLimits(tenants, clock).Limit(ok)), nil)

	send := func(who string) (int, string, string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
		r.Header.Set("Authorization", "Bearer "+secrets[strings.ToUpper(who)])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("Retry-After"), w.Body.String()
	}
	want := func(who string, code int, says string) {
		t.Helper()
		got, retry, body := send(who)
		if got != code {
			t.Fatalf("%s: %d %s, want %d", who, got, body, code)
		}
		if code == http.StatusTooManyRequests && (retry != "1" || !strings.Contains(body, says)) {
			t.Errorf("%s refused with Retry-After %q and %q; want 1 and %q", who, retry, body, says)
		}
	}
	const byTenant, byClient = `tenant "a"`, "server.rate_limit"
	want("alice", http.StatusOK, "")
	want("alice", http.StatusOK, "")
	want("alice", http.StatusTooManyRequests, byClient)               // alice's own burst of 2
	want("carol", http.StatusOK, "")                                  // the tenant's third
	want("carol", http.StatusTooManyRequests, "tenants.a.rate_limit") // carol has a token of her own, the tenant none
	for range 5 {
		want("bob", http.StatusOK, "") // another tenant: only bob's own limit, refilled below
		now = now.Add(time.Second)
	}
	// Five seconds later the tenant's bucket is full again (3), each
	// caller's too (2): four requests pass, whoever sends them, the fifth
	// is the tenant's.
	want("alice", http.StatusOK, "")
	want("alice", http.StatusOK, "")
	want("carol", http.StatusOK, "")
	want("carol", http.StatusTooManyRequests, byTenant)
	now = now.Add(time.Second)
	want("carol", http.StatusOK, "")
	if served != 12 {
		t.Errorf("served %d requests, want 12", served)
	}
}
