package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
)

// bgCounts counts the background runs this process holds, by owner, by
// tenant and in all, from the moment a call asks for one until the run
// ends: a reservation is taken under one lock, so that concurrent calls
// never pass a limit together.
type bgCounts struct {
	mu      sync.Mutex
	total   int
	owners  map[string]int
	tenants map[string]int
}

// bgClaim is who asks for a background run, and the limits that apply.
type bgClaim struct {
	owner, tenant string
	ownerMax      int // limits.max_background
	tenantMax     int // the tenant's max_background; 0 for none
	depth         int // limits.background_queue_depth
}

// bgFull says which limit a refused reservation met.
type bgFull int

const (
	bgFree bgFull = iota
	bgOwnerFull
	bgTenantFull
	bgDepthFull
)

// reserve takes a place for one background run of c, and returns the
// function that gives it back (once); or, when a limit is reached, which.
func (bc *bgCounts) reserve(c bgClaim) (release func(), full bgFull) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	switch {
	case bc.total >= c.depth:
		return nil, bgDepthFull
	case bc.owners[c.owner] >= c.ownerMax:
		return nil, bgOwnerFull
	case c.tenant != "" && c.tenantMax > 0 && bc.tenants[c.tenant] >= c.tenantMax:
		return nil, bgTenantFull
	}
	if bc.owners == nil {
		bc.owners, bc.tenants = map[string]int{}, map[string]int{}
	}
	bc.total++
	bc.owners[c.owner]++
	if c.tenant != "" {
		bc.tenants[c.tenant]++
	}
	var once sync.Once
	return func() { once.Do(func() { bc.give(c) }) }, bgFree
}

func (bc *bgCounts) give(c bgClaim) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.total--
	if bc.owners[c.owner]--; bc.owners[c.owner] == 0 {
		delete(bc.owners, c.owner)
	}
	if c.tenant != "" {
		if bc.tenants[c.tenant]--; bc.tenants[c.tenant] == 0 {
			delete(bc.tenants, c.tenant)
		}
	}
}

// bgClaimOf is the claim of req's caller: its owner as its runs are
// recorded (the machine's own callers share ""), its tenant and the
// limits of both.
func (a *App) bgClaimOf(req *mcp.CallToolRequest) bgClaim {
	l := a.Config.Limits
	c := bgClaim{ownerMax: l.MaxBackground, depth: l.BackgroundQueueDepth}
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		c.owner = req.Extra.TokenInfo.UserID
		c.tenant = tenancy.Of(req.Extra.TokenInfo)
		if _, t, ok := a.tenant(req.Extra.TokenInfo); ok {
			c.tenantMax = t.Limits.MaxBackground
		}
	}
	return c
}

// reserveBackground takes a place for a background run of req's caller;
// past a limit it returns the refusal, queue_full with a retry hint.
func (a *App) reserveBackground(ctx context.Context, req *mcp.CallToolRequest, e *orchestrate.Engine) (release func(), refused *mcp.CallToolResult) {
	c := a.bgClaimOf(req)
	release, full := a.bgCounts.reserve(c)
	if full == bgFree {
		return release, nil
	}
	retry := a.Config.Limits.QueueTimeout
	var msg string
	switch full {
	case bgOwnerFull:
		msg = fmt.Sprintf("you hold %d background runs, the most limits.max_background allows: await one to its end ({\"await\": {\"exec_id\": ...}}) or cancel one, then retry; orchestra://executions?status=running lists them", c.ownerMax)
	case bgTenantFull:
		msg = fmt.Sprintf("your tenant's callers hold %d background runs, the most its limits.max_background allows: retry once one of them ends (in %s or later), or run the plan without background", c.tenantMax, retry)
	default:
		msg = fmt.Sprintf("the server holds %d background runs, the most limits.background_queue_depth allows: retry in %s, or run the plan without background", c.depth, retry)
	}
	issue := &orchestrate.Issue{Path: "background", Code: orchestrate.CodeQueueFull, Message: msg, RetryAfterMS: retry.Milliseconds()}
	return nil, orchestrate.ResultFor(e.Reject(ctx, []*orchestrate.Issue{issue}), req.ProtocolVersion())
}
