package httpedge

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
)

// TenantLimits keep one token bucket per tenant with a rate_limit, shared
// by all the tenant's callers: every token and JWT subject it matches. It
// runs after authentication, which names the caller's tenant, and in
// addition to the per-client limit (RateLimiter), which runs before it.
type TenantLimits struct {
	limiters map[string]*RateLimiter // by tenant
}

// NewTenantLimits returns the limits of the tenants that set a rate_limit,
// or nil when none does.
func NewTenantLimits(tenants map[string]config.Tenant, now func() time.Time) *TenantLimits {
	tl := &TenantLimits{limiters: map[string]*RateLimiter{}}
	for name, t := range tenants {
		if rl := t.RateLimit; rl != nil && rl.RequestsPerSecond > 0 {
			l := NewRateLimiter(rl.RequestsPerSecond, rl.Burst)
			l.now = now
			tl.limiters[name] = l
		}
	}
	if len(tl.limiters) == 0 {
		return nil
	}
	return tl
}

// Limit answers a request of a tenant over its rate with 429 and
// Retry-After, as the per-client limit does, naming the tenant.
func (tl *TenantLimits) Limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := tenancy.Of(auth.TokenInfoFromContext(r.Context()))
		l := tl.limiters[tenant]
		if l == nil {
			next.ServeHTTP(w, r)
			return
		}
		ok, wait := l.allow(tenant)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		secs := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		http.Error(w, fmt.Sprintf("too many requests: the callers of tenant %q may send %g requests per second together (bursts of %d); retry after %d s, or raise tenants.%s.rate_limit in the server's configuration", tenant, float64(l.rps), l.burst, secs, tenant), http.StatusTooManyRequests)
	})
}
