package httpedge

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/testutil/jwttest"
)

// TestJWTResourceServer: a valid access token is accepted with its sub as
// the user id; expired, wrong issuer, wrong audience, bad signature and
// missing scope are refused with 401 or 403 and a WWW-Authenticate that
// names the protected resource metadata, which is served; a key rotation
// at the issuer is picked up.
func TestJWTResourceServer(t *testing.T) {
	is := jwttest.New(t)
	k1, other := jwttest.NewKey(t), jwttest.NewKey(t)
	is.Publish(map[string]*rsa.PrivateKey{"k1": k1})
	cfg := config.Auth{JWT: &config.JWT{Issuer: jwttest.Issuer, Audience: jwttest.Audience, JWKSURL: is.URL(), RequiredScopes: []string{"orchestra:run"}}}
	tokens, err := LoadTokens(cfg, nil, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", tokens.RequireToken(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil))
	mux.Handle(ProtectedResourcePath, ProtectedResourceHandler(*cfg.JWT))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	post := func(token string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp, b.String()
	}

	if resp, body := post(jwttest.Sign(t, "k1", k1, jwttest.Claims(nil))); resp.StatusCode != http.StatusOK {
		t.Fatalf("valid token: %d %s", resp.StatusCode, body)
	}
	metadata := `resource_metadata="` + srv.URL + ProtectedResourcePath + `"`
	for _, tc := range []struct {
		name   string
		token  string
		status int
		auth   string
	}{
		{"no token", "", 401, metadata},
		{"expired", jwttest.Sign(t, "k1", k1, jwttest.Claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), 401, `error="invalid_token"`},
		{"wrong issuer", jwttest.Sign(t, "k1", k1, jwttest.Claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })), 401, `error="invalid_token"`},
		{"wrong audience", jwttest.Sign(t, "k1", k1, jwttest.Claims(func(c jwt.MapClaims) { c["aud"] = "https://other.example.com/mcp" })), 401, `error="invalid_token"`},
		{"bad signature", jwttest.Sign(t, "k1", other, jwttest.Claims(nil)), 401, `error="invalid_token"`},
		{"no exp", jwttest.Sign(t, "k1", k1, jwttest.Claims(func(c jwt.MapClaims) { delete(c, "exp") })), 401, `error="invalid_token"`},
		{"missing scope", jwttest.Sign(t, "k1", k1, jwttest.Claims(func(c jwt.MapClaims) { c["scope"] = "profile" })), 403, `error="insufficient_scope", scope="orchestra:run"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(tc.token)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			got := resp.Header.Get("WWW-Authenticate")
			if !strings.Contains(got, tc.auth) || !strings.Contains(got, metadata) {
				t.Errorf("WWW-Authenticate = %q, want %q and %q", got, tc.auth, metadata)
			}
		})
	}

	// The protected resource metadata document.
	resp, err := http.Get(srv.URL + ProtectedResourcePath)
	if err != nil {
		t.Fatal(err)
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	json.NewDecoder(resp.Body).Decode(&prm)
	resp.Body.Close()
	if prm.Resource != jwttest.Audience || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != jwttest.Issuer || len(prm.ScopesSupported) != 1 {
		t.Errorf("protected resource metadata = %+v", prm)
	}

	// Rotation: the issuer replaces k1 with k2; a token signed with k2 is
	// accepted once the keys are fetched again, and k1's are refused.
	tokens.jwt.minRefresh = 0
	k2 := jwttest.NewKey(t)
	is.Publish(map[string]*rsa.PrivateKey{"k2": k2})
	if resp, body := post(jwttest.Sign(t, "k2", k2, jwttest.Claims(nil))); resp.StatusCode != http.StatusOK {
		t.Errorf("token signed with the rotated key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(jwttest.Sign(t, "k1", k1, jwttest.Claims(nil))); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("token signed with the retired key: %d, want 401", resp.StatusCode)
	}
}

// TestJWKSFetchHoldsNoLock: while the keys are being fetched, a token
// signed with a known key verifies without waiting for the fetch.
func TestJWKSFetchHoldsNoLock(t *testing.T) {
	k1 := jwttest.NewKey(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	first := true
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		slow := !first
		first = false
		mu.Unlock()
		if slow {
			entered <- struct{}{}
			<-release
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1",
			"n": base64.RawURLEncoding.EncodeToString(k1.N.Bytes()), "e": "AQAB"}}})
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	v := newJWTVerifier(config.JWT{Issuer: jwttest.Issuer, Audience: jwttest.Audience, JWKSURL: srv.URL})
	v.minRefresh = 0
	ctx := context.Background()
	if _, _, err := v.verify(ctx, jwttest.Sign(t, "k1", k1, jwttest.Claims(nil))); err != nil {
		t.Fatal(err)
	}
	// An unknown kid starts a fetch that blocks in the issuer.
	go v.verify(ctx, jwttest.Sign(t, "unknown", k1, jwttest.Claims(nil)))
	<-entered
	if _, _, err := v.verify(ctx, jwttest.Sign(t, "k1", k1, jwttest.Claims(nil))); err != nil {
		t.Errorf("a known key during a fetch: %v", err)
	}
}

// TestJWTTenantByClaims: a JWT's claims choose its tenant; claims that
// match no tenant are refused with 403.
func TestJWTTenantByClaims(t *testing.T) {
	is := jwttest.New(t)
	k1 := jwttest.NewKey(t)
	is.Publish(map[string]*rsa.PrivateKey{"k1": k1})
	auth := config.Auth{JWT: &config.JWT{Issuer: jwttest.Issuer, Audience: jwttest.Audience, JWKSURL: is.URL()}}
	s, err := LoadTokens(auth, nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s.tenants = tenancy.NewTable(map[string]config.Tenant{
		"partners": {Match: config.TenantMatch{Claims: map[string]string{"org": "partner-co"}}},
		"admins":   {Match: config.TenantMatch{Claims: map[string]string{"groups": "admin"}}},
		"scoped":   {Match: config.TenantMatch{Claims: map[string]string{"scope": "tenant:scoped"}}},
	})
	for _, tc := range []struct {
		claim  func(jwt.MapClaims)
		tenant string
	}{
		{func(c jwt.MapClaims) { c["org"] = "partner-co" }, "partners"},
		{func(c jwt.MapClaims) { c["groups"] = []any{"dev", "admin"} }, "admins"},
		{func(c jwt.MapClaims) { c["org"] = "someone-else" }, ""},
		// A claim matches as a whole: a space-separated string is one
		// value, except for the scope-like claims.
		{func(c jwt.MapClaims) { c["org"] = "evil partner-co" }, ""},
		{func(c jwt.MapClaims) { c["groups"] = "dev admin" }, ""},
		{func(c jwt.MapClaims) { c["scope"] = "orchestra:run tenant:scoped" }, "scoped"},
		{func(c jwt.MapClaims) { c["scope"] = "orchestra:run tenant:scoped-not" }, ""},
	} {
		ti, err := s.Verify(context.Background(), jwttest.Sign(t, "k1", k1, jwttest.Claims(tc.claim)))
		if tc.tenant == "" {
			if ae, ok := err.(*authError); !ok || ae.status != http.StatusForbidden {
				t.Errorf("claims matching no tenant: %v, want 403", err)
			}
			continue
		}
		if err != nil || tenancy.Of(ti) != tc.tenant || UserOf(ti) != "user-123" || ti.UserID != jwtOwner("https://auth.example.com", "user-123") {
			t.Errorf("want tenant %s: %+v, %v", tc.tenant, ti, err)
		}
	}
}
