// Package fairshare shares a fixed number of slots (the plans a server
// runs at once) among owners grouped in tenants, so that no owner and no
// tenant can hold them all, and a caller who waits is served before one
// who already holds more.
//
// The policy, for a pool of N slots with an owner share S and a tenant
// share T:
//
//   - an owner may always hold S slots; it may take one more only while,
//     after taking it, at least S slots stay free for the others (so one
//     owner alone holds at most N-S);
//   - a tenant's owners together may always hold T slots, more only under
//     the same condition; a tenant's own cap (Claim.TenantMax) is never
//     passed;
//   - a claim that may not take a slot now waits, until its context ends;
//     when a slot frees, it goes to the waiting claim whose owner holds the
//     fewest slots, then whose tenant does, then the one that came first.
//
// A server takes a slot per plan:
//
//	pool := fairshare.New(fairshare.Options{Slots: 64, OwnerShare: 16, TenantShare: 32})
//	release, err := pool.Acquire(ctx, fairshare.Claim{Owner: "user:alice", Tenant: "acme"})
//	if err != nil {
//		return err // a *fairshare.BusyError: why no slot came in time
//	}
//	defer release()
package fairshare
