package fairshare

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Options configure a Pool; zero shares take the defaults.
type Options struct {
	// Slots is how many slots there are in all.
	Slots int
	// OwnerShare is how many slots an owner may always hold, and how many
	// stay free for the others when it takes more; default a quarter of
	// Slots (at least one).
	OwnerShare int
	// TenantShare is how many slots a tenant's owners together may always
	// hold; default half of Slots (at least one).
	TenantShare int
}

// Claim is who asks for a slot.
type Claim struct {
	// Owner is the caller: its credential's user id, or its session.
	Owner string
	// Tenant is the caller's tenant, "" for none.
	Tenant string
	// TenantMax, when positive, caps the tenant's slots whatever is free
	// (its limits.max_concurrent_plans).
	TenantMax int
}

// BusyError says why a claim got no slot before its context ended.
type BusyError struct {
	// Reason is what kept it waiting the last time it was considered.
	Reason string
	// Err is its context's error.
	Err error
}

func (e *BusyError) Error() string { return e.Reason }
func (e *BusyError) Unwrap() error { return e.Err }

// Pool is a set of slots shared fairly. It is safe for concurrent use.
type Pool struct {
	opts Options

	mu      sync.Mutex
	held    int
	owners  map[string]int
	tenants map[string]int
	waiting []*waiter
	seq     uint64
}

type waiter struct {
	c       Claim
	seq     uint64
	granted chan struct{} // closed when the slot is the waiter's
	reason  string        // why it may not take one, when last considered
}

// New returns a pool.
func New(opts Options) *Pool {
	if opts.OwnerShare <= 0 {
		opts.OwnerShare = max(1, opts.Slots/4)
	}
	if opts.TenantShare <= 0 {
		opts.TenantShare = max(1, opts.Slots/2)
	}
	return &Pool{opts: opts, owners: map[string]int{}, tenants: map[string]int{}}
}

// Acquire takes a slot for c, waiting for one in the fair queue until ctx
// ends, and returns the function that gives it back (once). A claim that
// gets none returns a *BusyError saying why.
func (p *Pool) Acquire(ctx context.Context, c Claim) (release func(), err error) {
	p.mu.Lock()
	p.seq++
	w := &waiter{c: c, seq: p.seq, granted: make(chan struct{})}
	p.waiting = append(p.waiting, w)
	p.grant()
	p.mu.Unlock()
	select {
	case <-w.granted:
		return p.releaser(c), nil
	default:
	}
	select {
	case <-w.granted:
		return p.releaser(c), nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-w.granted: // granted as the context ended: keep it
		return p.releaser(c), nil
	default:
	}
	p.waiting = slices.DeleteFunc(p.waiting, func(x *waiter) bool { return x == w })
	return nil, &BusyError{Reason: w.reason, Err: ctx.Err()}
}

func (p *Pool) releaser(c Claim) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.held--
			p.dec(p.owners, c.Owner)
			if c.Tenant != "" {
				p.dec(p.tenants, c.Tenant)
			}
			p.grant()
		})
	}
}

func (p *Pool) dec(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k) // an owner who holds nothing costs nothing
	}
}

// grant gives free slots to the waiting claims that may take them, one
// at a time to the claim whose owner holds the fewest (then whose tenant
// does, then the oldest); p.mu is held.
func (p *Pool) grant() {
	for len(p.waiting) > 0 {
		best := -1
		for i, w := range p.waiting {
			if why := p.refuse(w.c); why != "" {
				w.reason = why
				continue
			}
			if best < 0 || p.before(w, p.waiting[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := p.waiting[best]
		p.waiting = slices.Delete(p.waiting, best, best+1)
		p.held++
		p.owners[w.c.Owner]++
		if w.c.Tenant != "" {
			p.tenants[w.c.Tenant]++
		}
		close(w.granted)
	}
}

// before reports whether a is served before b.
func (p *Pool) before(a, b *waiter) bool {
	if x, y := p.owners[a.c.Owner], p.owners[b.c.Owner]; x != y {
		return x < y
	}
	if x, y := p.tenantHeld(a.c), p.tenantHeld(b.c); x != y {
		return x < y
	}
	return a.seq < b.seq
}

func (p *Pool) tenantHeld(c Claim) int {
	if c.Tenant == "" {
		return 0
	}
	return p.tenants[c.Tenant]
}

// refuse says why c may not take a slot now, or "" when it may; p.mu is
// held.
func (p *Pool) refuse(c Claim) string {
	o := p.opts
	if n := p.tenantHeld(c); c.TenantMax > 0 && n >= c.TenantMax {
		return fmt.Sprintf("your tenant is running %d plans, its limit (tenants.%s.limits.max_concurrent_plans)", n, c.Tenant)
	}
	if o.Slots <= 0 {
		return "" // no limit, nothing to share
	}
	free := o.Slots - p.held
	if free <= 0 {
		return fmt.Sprintf("the server is running %d plans, its limit (limits.max_concurrent_plans)", o.Slots)
	}
	// Beyond its share, a claim may take a slot only if OwnerShare slots
	// stay free for the others after it.
	spare := free-1 >= o.OwnerShare
	if n := p.tenantHeld(c); c.Tenant != "" && n >= o.TenantShare && !spare {
		return fmt.Sprintf("your tenant is running %d plans, its share of the server's %d while others may need them (limits.plans_per_tenant)", n, o.Slots)
	}
	if n := p.owners[c.Owner]; n >= o.OwnerShare && !spare {
		return fmt.Sprintf("you are running %d plans, your share of the server's %d while others may need them (limits.plans_per_owner)", n, o.Slots)
	}
	return ""
}

// Held returns the slots held in all, by owner and by tenant.
func (p *Pool) Held(owner, tenant string) (all, byOwner, byTenant int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held, p.owners[owner], p.tenants[tenant]
}
