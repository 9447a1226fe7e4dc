package httpedge

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"
)

// RateLimiter keeps one token bucket per key: an authenticated caller (its
// owner, after authentication), or a remote address. Buckets idle for
// longer than idleAfter are dropped, and the buckets kept are capped at
// maxBuckets (the least recently seen go first), so that no stream of
// fresh keys can grow them without bound.
type RateLimiter struct {
	rps   rate.Limit
	burst int
	now   func() time.Time
	// what says what is limited in a refusal ("this client may send
	// requests"), raise which setting raises the limit.
	what, raise string

	mu      sync.Mutex
	clients map[string]*clientBucket
	swept   time.Time
}

type clientBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const (
	// idleAfter is how long a bucket is kept after its last request.
	idleAfter = 10 * time.Minute
	// maxBuckets caps the buckets of one limiter.
	maxBuckets = 1 << 16
)

// NewRateLimiter returns a limit of rps requests per second, in bursts
// of burst (default: rps rounded up), for each client: the authenticated
// caller (its owner) behind RequireToken, else the remote address.
func NewRateLimiter(rps float64, burst int) *RateLimiter {
	if burst <= 0 {
		burst = max(1, int(math.Ceil(rps)))
	}
	return &RateLimiter{rps: rate.Limit(rps), burst: burst, now: time.Now, clients: map[string]*clientBucket{},
		what: "this client may send requests", raise: "server.rate_limit"}
}

// Refusing sets what a refusal of l says is limited ("this address may
// fail authentication").
func (l *RateLimiter) Refusing(what string) { l.what = what }

// addrKey names the remote address of r; an IPv6 address by its /64, which
// one host commonly holds whole.
func addrKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() && !a.Is4In6() {
		if p, err := a.Prefix(64); err == nil {
			return "addr:" + p.String()
		}
	}
	return "addr:" + host
}

// clientKey names the client of r for matching its calls (httpCalls): its
// bearer token when tokens accept it or it looks like a JWT, otherwise its
// remote address.
func clientKey(r *http.Request, tokens *Tokens) string {
	if tokens != nil {
		if tok, ok := bearer(r); ok && (tokens.match(tok) || tokens.jwt != nil && strings.Count(tok, ".") == 2) {
			return clientID(tok)
		}
	}
	return addrKey(r)
}

// bucket returns key's bucket, made if need be. It runs with l.mu held.
func (l *RateLimiter) bucket(key string, now time.Time) *clientBucket {
	if now.Sub(l.swept) > idleAfter {
		for k, b := range l.clients {
			if now.Sub(b.seen) > idleAfter {
				delete(l.clients, k)
			}
		}
		l.swept = now
	}
	b := l.clients[key]
	if b == nil {
		if len(l.clients) >= maxBuckets {
			l.evict()
		}
		b = &clientBucket{lim: rate.NewLimiter(l.rps, l.burst)}
		l.clients[key] = b
	}
	b.seen = now
	return b
}

// evict drops the least recently seen eighth of the buckets.
func (l *RateLimiter) evict() {
	seen := make([]time.Time, 0, len(l.clients))
	for _, b := range l.clients {
		seen = append(seen, b.seen)
	}
	slices.SortFunc(seen, func(a, b time.Time) int { return a.Compare(b) })
	cut := seen[len(seen)/8]
	for k, b := range l.clients {
		if !b.seen.After(cut) {
			delete(l.clients, k)
		}
	}
}

// allow takes a token from key's bucket, or returns how long the client
// must wait for one.
func (l *RateLimiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.bucket(key, now).lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// spent reports whether key's bucket is empty, and how long until it holds
// a token again, without taking one.
func (l *RateLimiter) spent(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[key]
	if !ok {
		return false, 0
	}
	if n := b.lim.TokensAt(now); n < 1 {
		return true, time.Duration((1 - n) / float64(l.rps) * float64(time.Second))
	}
	return false, 0
}

// refuse answers 429 with Retry-After.
func (l *RateLimiter) refuse(w http.ResponseWriter, wait time.Duration) {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, fmt.Sprintf("too many requests: %s %g times a second (bursts of %d); retry after %d s, or raise %s in the server's configuration", l.what, float64(l.rps), l.burst, secs, l.raise), http.StatusTooManyRequests)
}

// Limit answers a client over its rate with 429 and Retry-After: the
// authenticated caller (its owner) when RequireToken ran before, else the
// remote address.
func (l *RateLimiter) Limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := addrKey(r)
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && ti.UserID != "" {
			key = ti.UserID
		}
		if ok, wait := l.allow(key); !ok {
			l.refuse(w, wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}
