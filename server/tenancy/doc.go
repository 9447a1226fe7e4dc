// Package tenancy says who an authenticated caller is: the tenant its
// credential belongs to (a static token's name, a JWT's claims, matched
// against the configuration's tenants block), whose records it may read,
// and which tools its tenant may call. The HTTP edge writes the tenant
// into the caller's token info; the server reads it back from there.
//
//	table := tenancy.NewTable(cfg.Tenants)
//	name, ok := table.ForClaims(claims)
//	...
//	scope := tenancy.CallerScope(req.Extra) // the runs the caller may read
package tenancy
