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
		data, err := config.ReadFile(cfg.TokensFile)
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
//
// failures, when set, is a per-address limit on requests that fail
// authentication: a request from an address whose bucket is spent is
// refused (429) before its credential is verified, unless it is a static
// token (checked at no cost), and each refused credential takes a token.
// Nothing is kept per credential before it verifies, so a stream of
// made-up tokens costs one bucket per address.
func (s *Tokens) RequireToken(next http.Handler, failures *RateLimiter) http.Handler {
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		if ti, ok := r.Context().Value(verifiedKey{}).(*auth.TokenInfo); ok {
			return ti, nil
		}
		return nil, auth.ErrInvalidToken
	}
	inner := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := addrKey(r)
		token, ok := bearer(r)
		if failures != nil && !(ok && s.match(token)) {
			// A static token is checked at no cost; anything else waits
			// for its address's failures to allow it.
			if spent, wait := failures.spent(addr); spent {
				failures.refuse(w, wait)
				return
			}
		}
		failed := func() {
			if failures != nil {
				failures.allow(addr)
			}
		}
		if !ok {
			failed()
			s.challenge(w, r, http.StatusUnauthorized, "", "authentication required: send the header \"Authorization: Bearer TOKEN\" with a token listed in server.auth (tokens_env, tokens_file or tokens) of the server's configuration"+s.jwtHint())
			return
		}
		ti, err := s.Verify(r.Context(), token)
		var ae *authError
		switch {
		case errors.As(err, &ae):
			failed()
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

// Owners are namespaced by how the caller authenticated: the owner of a
// static token's runs is "static:" and its name, that of a JWT's
// "jwt:" and its issuer, "#" and its sub (an issuer identifier has no
// fragment). No JWT can name a static token's owner, whatever its sub.
// The owner is the token info's UserID, which scopes records, pauses and
// insights and ties HTTP sessions; the user id shown (_metadata.user_id,
// the records' user_id) stays the name or the sub, under userKey.
func staticOwner(name string) string { return "static:" + name }

func jwtOwner(issuer, sub string) string { return "jwt:" + issuer + "#" + sub }

// LegacyOwner returns the namespaced owner of records written before
// owners were namespaced, when the configuration tells which kind of
// caller the bare name was: a static token's name when no JWT is
// accepted, a JWT's sub when the name is no static token's. A name that
// could be either is left as it is (ok false): no authenticated caller
// sees those records any more, the machine's own callers still do.
func (s *Tokens) LegacyOwner(name string) (owner string, ok bool) {
	static := slices.ContainsFunc(s.static, func(t staticToken) bool { return t.name == name })
	switch {
	case static && s.jwt == nil:
		return staticOwner(name), true
	case !static && s.jwt != nil:
		return jwtOwner(s.jwt.cfg.Issuer, name), true
	}
	return "", false
}

// userKey is the key of auth.TokenInfo.Extra that holds the caller's user
// id as shown: a static token's name, a JWT's sub.
const userKey = "orchestra/user"

// UserOf returns the user id shown for the caller of ti.
func UserOf(ti *auth.TokenInfo) string {
	if u, ok := ti.Extra[userKey].(string); ok {
		return u
	}
	return ti.UserID
}

// Verify returns the token info of token: a static token's, or a JWT's
// (with its tenant when tenants are configured). It is how a caller is
// authenticated at /mcp and in the web viewer.
func (s *Tokens) Verify(ctx context.Context, token string) (*auth.TokenInfo, error) {
	if name, ok := s.lookup(token); ok {
		ti := &auth.TokenInfo{UserID: staticOwner(name), Scopes: s.scopes, Expiration: time.Now().Add(24 * time.Hour), Extra: map[string]any{userKey: name}}
		if s.tenants != nil {
			ti.Extra[tenancy.Key] = s.tenants.ForToken(name)
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
		ti.Extra[tenancy.Key] = t
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
