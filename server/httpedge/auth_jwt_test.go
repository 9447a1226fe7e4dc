package httpedge

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
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
)

// issuer is a fake authorization server: it signs tokens and publishes its
// current keys as a JWK set.
type issuer struct {
	t       *testing.T
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
	fetches int
	srv     *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{t: t, keys: map[string]*rsa.PrivateKey{}}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.fetches++
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
				"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
		json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// publish replaces the published keys.
func (is *issuer) publish(keys map[string]*rsa.PrivateKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

func sign(t *testing.T, kid string, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	testIssuer   = "https://auth.example.com"
	testAudience = "https://orchestra.example.com/mcp"
)

func claims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "user-123",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "orchestra:run profile"}
	if mod != nil {
		mod(c)
	}
	return c
}

// TestJWTResourceServer: a valid access token is accepted with its sub as
// the user id; expired, wrong issuer, wrong audience, bad signature and
// missing scope are refused with 401 or 403 and a WWW-Authenticate that
// names the protected resource metadata, which is served; a key rotation
// at the issuer is picked up.
func TestJWTResourceServer(t *testing.T) {
	is := newIssuer(t)
	k1, other := newRSAKey(t), newRSAKey(t)
	is.publish(map[string]*rsa.PrivateKey{"k1": k1})
	cfg := config.Auth{JWT: &config.JWT{Issuer: testIssuer, Audience: testAudience, JWKSURL: is.srv.URL, RequiredScopes: []string{"orchestra:run"}}}
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

	if resp, body := post(sign(t, "k1", k1, claims(nil))); resp.StatusCode != http.StatusOK {
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
		{"expired", sign(t, "k1", k1, claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), 401, `error="invalid_token"`},
		{"wrong issuer", sign(t, "k1", k1, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })), 401, `error="invalid_token"`},
		{"wrong audience", sign(t, "k1", k1, claims(func(c jwt.MapClaims) { c["aud"] = "https://other.example.com/mcp" })), 401, `error="invalid_token"`},
		{"bad signature", sign(t, "k1", other, claims(nil)), 401, `error="invalid_token"`},
		{"no exp", sign(t, "k1", k1, claims(func(c jwt.MapClaims) { delete(c, "exp") })), 401, `error="invalid_token"`},
		{"missing scope", sign(t, "k1", k1, claims(func(c jwt.MapClaims) { c["scope"] = "profile" })), 403, `error="insufficient_scope", scope="orchestra:run"`},
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
	if prm.Resource != testAudience || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != testIssuer || len(prm.ScopesSupported) != 1 {
		t.Errorf("protected resource metadata = %+v", prm)
	}

	// Rotation: the issuer replaces k1 with k2; a token signed with k2 is
	// accepted once the keys are fetched again, and k1's are refused.
	tokens.jwt.minRefresh = 0
	k2 := newRSAKey(t)
	is.publish(map[string]*rsa.PrivateKey{"k2": k2})
	if resp, body := post(sign(t, "k2", k2, claims(nil))); resp.StatusCode != http.StatusOK {
		t.Errorf("token signed with the rotated key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(sign(t, "k1", k1, claims(nil))); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("token signed with the retired key: %d, want 401", resp.StatusCode)
	}
}

// TestJWKSFetchHoldsNoLock: while the keys are being fetched, a token
// signed with a known key verifies without waiting for the fetch.
func TestJWKSFetchHoldsNoLock(t *testing.T) {
	k1 := newRSAKey(t)
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
	v := newJWTVerifier(config.JWT{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL})
	v.minRefresh = 0
	ctx := context.Background()
	if _, _, err := v.verify(ctx, sign(t, "k1", k1, claims(nil))); err != nil {
		t.Fatal(err)
	}
	// An unknown kid starts a fetch that blocks in the issuer.
	go v.verify(ctx, sign(t, "unknown", k1, claims(nil)))
	<-entered
	if _, _, err := v.verify(ctx, sign(t, "k1", k1, claims(nil))); err != nil {
		t.Errorf("a known key during a fetch: %v", err)
	}
}

// TestJWTTenantByClaims: a JWT's claims choose its tenant; claims that
// match no tenant are refused with 403.
func TestJWTTenantByClaims(t *testing.T) {
	is := newIssuer(t)
	k1 := newRSAKey(t)
	is.publish(map[string]*rsa.PrivateKey{"k1": k1})
	auth := config.Auth{JWT: &config.JWT{Issuer: testIssuer, Audience: testAudience, JWKSURL: is.srv.URL}}
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
		ti, err := s.Verify(context.Background(), sign(t, "k1", k1, claims(tc.claim)))
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
