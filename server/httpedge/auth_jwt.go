package httpedge

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
)

// jwtVerifier checks OAuth access tokens (JWTs) against the issuer's keys,
// fetched from its JWKS URL and kept. A token signed with a key it does not
// know makes it fetch the keys again (at most every jwksMinRefresh), so a
// rotation at the issuer is picked up without a restart; the keys are also
// fetched again once they are jwksMaxAge old. The fetch happens without
// holding the lock: requests with known keys are never held up by it, and
// concurrent requests that need a fetch share one.
type jwtVerifier struct {
	cfg    config.JWT
	client *http.Client
	parser *jwt.Parser
	now    func() time.Time

	minRefresh time.Duration

	mu       sync.Mutex
	keys     map[string]any // by kid; "" holds a key without kid
	fetched  time.Time
	inflight chan struct{} // closed when the fetch under way ends; nil when none
	fetchErr error
}

const (
	jwksMinRefresh = 10 * time.Second
	jwksMaxAge     = time.Hour
	jwksMaxBytes   = 1 << 20
	defaultLeeway  = 30 * time.Second
)

func newJWTVerifier(cfg config.JWT) *jwtVerifier {
	leeway := cfg.Leeway.D()
	if leeway == 0 {
		leeway = defaultLeeway
	}
	v := &jwtVerifier{cfg: cfg, client: &http.Client{Timeout: 10 * time.Second}, now: time.Now, minRefresh: jwksMinRefresh}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience), // no token passthrough: a token for another resource is refused
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	return v
}

// verify checks token and returns its token info and claims; a refused
// token is an *authError, a failure to fetch the keys another error.
func (v *jwtVerifier) verify(ctx context.Context, token string) (*auth.TokenInfo, jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	var fetchErr error
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		key, err := v.key(ctx, kid)
		if err != nil {
			fetchErr = err
		}
		return key, err
	})
	if fetchErr != nil && !errors.Is(fetchErr, errUnknownKey) {
		return nil, nil, fetchErr
	}
	if err != nil {
		return nil, nil, &authError{http.StatusUnauthorized, "invalid_token", "the access token is not accepted: " + jwtReason(err)}
	}
	sub, _ := claims.GetSubject()
	if sub == "" {
		return nil, nil, &authError{http.StatusUnauthorized, "invalid_token", "the access token is not accepted: it has no sub"}
	}
	ti := &auth.TokenInfo{UserID: jwtOwner(v.cfg.Issuer, sub), Scopes: scopesOf(claims), Extra: map[string]any{userKey: sub}}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		ti.Expiration = exp.Time
	}
	return ti, claims, nil
}

// jwtReason says why golang-jwt refused a token, without echoing it.
func jwtReason(err error) string {
	for _, r := range []struct {
		err error
		msg string
	}{
		{jwt.ErrTokenExpired, "it has expired"},
		{jwt.ErrTokenNotValidYet, "it is not valid yet"},
		{jwt.ErrTokenInvalidIssuer, "it was not issued by the configured issuer"},
		{jwt.ErrTokenInvalidAudience, "it is not meant for this server (audience)"},
		{jwt.ErrTokenRequiredClaimMissing, "it lacks a required claim (exp, iss or aud)"},
		{jwt.ErrTokenSignatureInvalid, "its signature does not verify"},
		{errUnknownKey, "it is signed with a key the issuer does not publish"},
		{jwt.ErrTokenMalformed, "it is not a well-formed JWT"},
		{jwt.ErrTokenUnverifiable, "its signature cannot be verified"},
	} {
		if errors.Is(err, r.err) {
			return r.msg
		}
	}
	return "it does not verify"
}

// scopesOf returns the scopes of the scope claim (space-separated, RFC
// 9068) or the scp claim (a list or a string).
func scopesOf(claims jwt.MapClaims) []string {
	var out []string
	for _, name := range []string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

var errUnknownKey = errors.New("signing key not published by the issuer")

// key returns the public key kid names, fetching the keys when it is
// unknown or they are old.
func (v *jwtVerifier) key(ctx context.Context, kid string) (any, error) {
	for attempt := 0; ; attempt++ {
		v.mu.Lock()
		k, known := v.keys[kid]
		stale := v.now().Sub(v.fetched) > jwksMaxAge
		if known && !stale {
			v.mu.Unlock()
			return k, nil
		}
		if attempt > 0 || (!stale && v.now().Sub(v.fetched) < v.minRefresh) {
			err := v.fetchErr
			v.mu.Unlock()
			if known {
				return k, nil
			}
			if err != nil {
				return nil, err
			}
			return nil, errUnknownKey
		}
		wait := v.inflight
		if wait == nil {
			wait = make(chan struct{})
			v.inflight = wait
			v.mu.Unlock()
			keys, err := v.fetch(ctx)
			v.mu.Lock()
			if err == nil {
				v.keys = keys
			}
			v.fetchErr = err
			v.fetched = v.now()
			v.inflight = nil
			close(wait)
			v.mu.Unlock()
			continue
		}
		v.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fetch reads the issuer's JWK set.
func (v *jwtVerifier) fetch(ctx context.Context) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys from %s: %w", v.cfg.JWKSURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the issuer's keys from %s: %s", v.cfg.JWKSURL, resp.Status)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	// The key set passes the decoding gate: a key set is a few kilobytes.
	data, err := jsongate.Limits{Bytes: jwksMaxBytes, Depth: 16, Elements: 10_000}.ReadAll(resp.Body)
	if err == nil {
		err = json.Unmarshal(data, &set)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the issuer's keys from %s: %w", v.cfg.JWKSURL, err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if pub, err := k.publicKey(); err == nil {
			keys[k.Kid] = pub
		}
	}
	return keys, nil
}

// jwk is one JSON Web Key (RFC 7517) of a public signing key.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (k jwk) publicKey() (any, error) {
	b := func(s string) (*big.Int, error) {
		raw, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(raw) == 0 {
			return nil, errors.New("bad key parameter")
		}
		return new(big.Int).SetBytes(raw), nil
	}
	switch k.Kty {
	case "RSA":
		n, err := b(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b(k.E)
		if err != nil || !e.IsInt64() {
			return nil, errors.New("bad RSA exponent")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, errors.New("unknown curve")
		}
		x, err := b(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b(k.Y)
		if err != nil {
			return nil, err
		}
		return &ecdsa.PublicKey{Curve: curve, X: x, Y: y}, nil
	case "OKP":
		raw, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Crv != "Ed25519" || err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key")
		}
		return ed25519.PublicKey(raw), nil
	}
	return nil, errors.New("unknown key type")
}

// ProtectedResourcePath is where the protected resource metadata (RFC
// 9728) is served when JWTs are accepted.
const ProtectedResourcePath = "/.well-known/oauth-protected-resource"

// resourceMetadataURL is the absolute URL of the metadata, on the host r
// was sent to.
func resourceMetadataURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + ProtectedResourcePath
}

// ProtectedResourceHandler serves the metadata document that tells an MCP
// client which authorization server issues tokens for this server.
func ProtectedResourceHandler(cfg config.JWT) http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               cfg.Audience,
		AuthorizationServers:   []string{cfg.Issuer},
		ScopesSupported:        cfg.RequiredScopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "orchestra",
	})
}
