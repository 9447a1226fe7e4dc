package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/orchestra-mcp/orchestra/config"
)

// tokenSet holds the accepted bearer tokens as SHA-256 digests, so that
// every comparison takes the same time whatever the token's length.
type tokenSet struct {
	digests [][sha256.Size]byte
}

// loadTokens reads the tokens that cfg names; it returns nil when
// authentication is off, and an error when it is on and yields no token.
func loadTokens(cfg config.Auth, lookup func(string) (string, bool)) (*tokenSet, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	var tokens []string
	if cfg.TokensEnv != "" {
		v, ok := lookup(cfg.TokensEnv)
		if !ok {
			return nil, fmt.Errorf("server.auth.tokens_env names %s, which is not set: set it to one or more tokens separated by commas", cfg.TokensEnv)
		}
		tokens = append(tokens, strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })...)
	}
	if cfg.TokensFile != "" {
		data, err := os.ReadFile(cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("server.auth.tokens_file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" && !strings.HasPrefix(line, "#") {
				tokens = append(tokens, line)
			}
		}
	}
	if len(tokens) == 0 {
		return nil, errors.New("server.auth is configured but holds no token: put at least one in the variable of server.auth.tokens_env or the file of server.auth.tokens_file")
	}
	s := &tokenSet{}
	for _, t := range tokens {
		s.digests = append(s.digests, sha256.Sum256([]byte(t)))
	}
	return s, nil
}

// match reports whether token is one of the set, comparing against every
// token in constant time.
func (s *tokenSet) match(token string) bool {
	d := sha256.Sum256([]byte(token))
	found := 0
	for _, want := range s.digests {
		found |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return found == 1
}

// clientID names the holder of a token without revealing it: it keys
// rate limits and ties HTTP sessions to the token that opened them.
func clientID(token string) string {
	d := sha256.Sum256([]byte(token))
	return "token:" + hex.EncodeToString(d[:6])
}

// bearer returns the bearer token of r.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// requireToken answers requests without a valid bearer token with 401 and
// WWW-Authenticate. Accepted requests carry the SDK's token info, whose
// user id ties a session to the token that opened it: another token cannot
// use the session.
func (s *tokenSet) requireToken(next http.Handler) http.Handler {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if !s.match(token) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: clientID(token), Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	inner := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="orchestra"`)
			http.Error(w, "authentication required: send the header \"Authorization: Bearer TOKEN\" with a token listed in server.auth (tokens_env or tokens_file) of the server's configuration", http.StatusUnauthorized)
		case !s.match(token):
			w.Header().Set("WWW-Authenticate", `Bearer realm="orchestra", error="invalid_token"`)
			http.Error(w, "the bearer token is not accepted: use a token listed in server.auth (tokens_env or tokens_file) of the server's configuration", http.StatusUnauthorized)
		default:
			inner.ServeHTTP(w, r)
		}
	})
}
