package httpedge

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter keeps one token bucket per client: a client is its bearer
// token when it has a valid one, else its remote address. Buckets idle for
// longer than idleAfter are dropped.
type RateLimiter struct {
	rps    rate.Limit
	burst  int
	tokens *Tokens // nil without authentication
	now    func() time.Time

	mu      sync.Mutex
	clients map[string]*clientBucket
	swept   time.Time
}

type clientBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleAfter is how long a client's bucket is kept after its last request.
const idleAfter = 10 * time.Minute

// NewRateLimiter returns a limit of rps requests per second, in bursts
// of burst (default: rps rounded up), for each client: a client is its
// bearer token when tokens accept it, else its remote address.
func NewRateLimiter(rps float64, burst int, tokens *Tokens) *RateLimiter {
	if burst <= 0 {
		burst = max(1, int(math.Ceil(rps)))
	}
	return &RateLimiter{rps: rate.Limit(rps), burst: burst, tokens: tokens, now: time.Now, clients: map[string]*clientBucket{}}
}

// key names the client of r.
func (l *RateLimiter) key(r *http.Request) string { return clientKey(r, l.tokens) }

// clientKey names the client of r: its bearer token when tokens accept it,
// otherwise its remote address.
func clientKey(r *http.Request, tokens *Tokens) string {
	if tokens != nil {
		if tok, ok := bearer(r); ok && (tokens.match(tok) || tokens.jwt != nil && strings.Count(tok, ".") == 2) {
			return clientID(tok) // a JWT that does not verify is refused after this, at no cost to its holder's peers
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// allow takes a token from the client's bucket, or returns how long the
// client must wait for one.
func (l *RateLimiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
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
		b = &clientBucket{lim: rate.NewLimiter(l.rps, l.burst)}
		l.clients[key] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Limit answers a client over its rate with 429 and Retry-After.
func (l *RateLimiter) Limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, wait := l.allow(l.key(r))
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		http.Error(w, fmt.Sprintf("too many requests: this client may send %g requests per second (bursts of %d); retry after %d s, or raise server.rate_limit in the server's configuration", float64(l.rps), l.burst, secs), http.StatusTooManyRequests)
	})
}
