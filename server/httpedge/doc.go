// Package httpedge is what stands between the network and orchestra's
// Streamable HTTP endpoint: bearer-token and OAuth (JWT) authentication
// with the protected resource metadata, the tenant of each caller (see
// package tenancy), per-client and per-tenant rate limits, caps on
// connections, the intake that reads a request's body within its limits
// and refuses sessions beyond the cap, and the tools/call requests in
// flight, tied to the connection that carries each.
//
// The server assembles them around the SDK's handler:
//
//	tokens, err := httpedge.LoadTokens(cfg.Server.Auth, tenancy.NewTable(cfg.Tenants), os.LookupEnv)
//	in := &httpedge.Intake{Server: cfg.Server, Sessions: countSessions, Calls: &calls, Tokens: tokens}
//	h := tokens.RequireToken(in.Handler(sdkHandler))
//	h = httpedge.NewRateLimiter(rps, burst).Limit(h)
//	ln = httpedge.LimitConnections(ln, cfg.Server, logger)
package httpedge
