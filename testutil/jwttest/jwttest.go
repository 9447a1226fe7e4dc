// Package jwttest is a fake authorization server for tests: it signs
// access tokens with RSA keys and publishes the current keys as a JWK set.
package jwttest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The issuer and the audience of the tokens [Claims] makes.
const (
	Issuer   = "https://auth.example.com"
	Audience = "https://orchestra.example.com/mcp"
)

// Server publishes its keys as a JWK set at [Server.URL].
type Server struct {
	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey
	srv  *httptest.Server
}

// New starts a server with no keys; it stops when t ends.
func New(t testing.TB) *Server {
	s := &Server{keys: map[string]*rsa.PrivateKey{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range s.keys {
			set.Keys = append(set.Keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
				"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
		json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the address of the JWK set.
func (s *Server) URL() string { return s.srv.URL }

// Publish replaces the published keys, by key id.
func (s *Server) Publish(keys map[string]*rsa.PrivateKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

// NewKey makes an RSA key to sign with.
func NewKey(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Sign signs claims with key (RS256), naming kid in the header.
func Sign(t testing.TB, kid string, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Claims returns the claims of a valid token (issuer, audience, subject
// user-123, an hour to live, scopes orchestra:run and profile), changed by
// mod when it is not nil.
func Claims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"iss": Issuer, "aud": Audience, "sub": "user-123",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "orchestra:run profile"}
	if mod != nil {
		mod(c)
	}
	return c
}
