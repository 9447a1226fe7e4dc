package httpedge

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
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
)

// Tokens authenticate HTTP callers: static bearer tokens, kept as
// SHA-256 digests so that every comparison takes the same time whatever
// the token's length, each with the name that is its holder's user id,
// and, when server.auth.jwt is set, OAuth access tokens (JWTs).
type Tokens struct {
	static  []staticToken
	jwt     *jwtVerifier   // nil without server.auth.jwt
	tenants *tenancy.Table // nil without tenants
	scopes  []string       // server.auth.jwt.required_scopes
}

// staticToken is one accepted static token.
type staticToken struct {
	name   string
	digest [sha256.Size]byte
}

// LoadTokens reads the tokens that cfg names, recognising their holders'
// tenants in tenants (nil without tenants); it returns nil when
// authentication is off, and an error when it is on and yields no token.
func LoadTokens(cfg config.Auth, tenants *tenancy.Table, lookup func(string) (string, bool)) (*Tokens, error) {
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
	s := &Tokens{tenants: tenants}
	for _, t := range tokens {
		// An unnamed token's user id is a short hash of it: never the token.
		s.static = append(s.static, staticToken{name: clientID(t), digest: sha256.Sum256([]byte(t))})
	}
	for _, nt := range cfg.Tokens {
		v, err := nt.Value(lookup)
		if err != nil {
			return nil, err
		}
		s.static = append(s.static, staticToken{name: nt.Name, digest: sha256.Sum256([]byte(v))})
	}
	if j := cfg.JWT; j != nil {
		s.jwt = newJWTVerifier(*j)
		s.scopes = j.RequiredScopes
	}
	if len(s.static) == 0 && s.jwt == nil {
		return nil, errors.New("server.auth is configured but holds no token: put at least one in the variable of server.auth.tokens_env or the file of server.auth.tokens_file, or name tokens in server.auth.tokens")
	}
	return s, nil
}

// match reports whether token is one of the static tokens, comparing
// against every one in constant time.
func (s *Tokens) match(token string) bool {
	_, ok := s.lookup(token)
	return ok
}

// lookup returns the name of the static token token, if it is one.
func (s *Tokens) lookup(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	name, found := "", 0
	for _, t := range s.static {
		if subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1 {
			name, found = t.name, 1
		}
	}
	return name, found == 1
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

// RequireToken answers requests without a valid bearer token with 401
// and WWW-Authenticate (naming the protected resource metadata when JWTs
// are accepted), and those whose token lacks a required scope with 403.
// Accepted requests carry the SDK's token info: its user id is the
// caller's (a token's name, a JWT's sub), which ties a session to the
// caller that opened it, and its Extra holds the caller's tenant.
func (s *Tokens) RequireToken(next http.Handler) http.Handler {
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		if ti, ok := r.Context().Value(verifiedKey{}).(*auth.TokenInfo); ok {
			return ti, nil
		}
		return nil, auth.ErrInvalidToken
	}
	inner := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			s.challenge(w, r, http.StatusUnauthorized, "", "authentication required: send the header \"Authorization: Bearer TOKEN\" with a token listed in server.auth (tokens_env, tokens_file or tokens) of the server's configuration"+s.jwtHint())
			return
		}
		ti, err := s.Verify(r.Context(), token)
		var ae *authError
		switch {
		case errors.As(err, &ae):
			s.challenge(w, r, ae.status, ae.code, ae.msg)
			return
		case err != nil:
			http.Error(w, "checking the bearer token: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, ti)))
	})
}

// verifiedKey carries the token info RequireToken verified to the SDK's
// middleware.
type verifiedKey struct{}

// authError is a refused credential: its HTTP status and OAuth error code.
type authError struct {
	status int
	code   string // invalid_token or insufficient_scope
	msg    string
}

func (e *authError) Error() string { return e.msg }

// Verify returns the token info of token: a static token's, or a JWT's
// (with its tenant when tenants are configured). It is how a caller is
// authenticated at /mcp and in the web viewer.
func (s *Tokens) Verify(ctx context.Context, token string) (*auth.TokenInfo, error) {
	if name, ok := s.lookup(token); ok {
		ti := &auth.TokenInfo{UserID: name, Scopes: s.scopes, Expiration: time.Now().Add(24 * time.Hour)}
		if s.tenants != nil {
			ti.Extra = map[string]any{tenancy.Key: s.tenants.ForToken(name)}
		}
		return ti, nil
	}
	if s.jwt == nil || strings.Count(token, ".") != 2 {
		return nil, &authError{http.StatusUnauthorized, "invalid_token", "the bearer token is not accepted: use a token listed in server.auth (tokens_env, tokens_file or tokens) of the server's configuration" + s.jwtHint()}
	}
	ti, claims, err := s.jwt.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	for _, want := range s.scopes {
		if !slices.Contains(ti.Scopes, want) {
			return nil, &authError{http.StatusForbidden, "insufficient_scope", fmt.Sprintf("the access token lacks the scope %q: ask the authorization server for a token with the scopes %s", want, strings.Join(s.scopes, " "))}
		}
	}
	if s.tenants != nil {
		t, ok := s.tenants.ForClaims(claims)
		if !ok {
			return nil, &authError{http.StatusForbidden, "insufficient_scope", "the access token's claims match no tenant of the server's configuration"}
		}
		ti.Extra = map[string]any{tenancy.Key: t}
	}
	return ti, nil
}

// AcceptsJWT reports whether OAuth access tokens are accepted
// (server.auth.jwt): the protected resource metadata is then served.
func (s *Tokens) AcceptsJWT() bool { return s.jwt != nil }

func (s *Tokens) jwtHint() string {
	if s.jwt == nil {
		return ""
	}
	return ", or an OAuth access token from " + s.jwt.cfg.Issuer + " for " + s.jwt.cfg.Audience
}

// challenge answers a refused request with status and the
// WWW-Authenticate header of RFC 6750, which names the protected resource
// metadata (RFC 9728) when JWTs are accepted.
func (s *Tokens) challenge(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	params := []string{`realm="orchestra"`}
	if code != "" {
		params = append(params, fmt.Sprintf("error=%q", code))
	}
	if code == "insufficient_scope" && len(s.scopes) > 0 {
		params = append(params, fmt.Sprintf("scope=%q", strings.Join(s.scopes, " ")))
	}
	if s.jwt != nil {
		params = append(params, fmt.Sprintf("resource_metadata=%q", resourceMetadataURL(r)))
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, msg, status)
}
