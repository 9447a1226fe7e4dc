package server

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/fairshare"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Background runs across replicas. With the PostgreSQL store, a
// background run is a job any replica may take up: the replica that
// accepted it runs it and holds its lease (store.Options.Lease, renewed
// every Lease/3); when that replica dies, a surviving one marks the run
// interrupted once the lease lapsed and takes it up (store.TakeOrphans,
// one replica per run) by resuming it with resume's rules: the steps that
// succeeded are not run again; the step in flight at the crash runs again.
// After each sweep of the leases (store.OnSweep, every Lease/3) a replica
// takes up such runs one by one for as long as it finds them and has
// slots; between sweeps it asks nothing. A cancel asked on another
// replica sets a flag in the store that the running replica reads in the
// same sweep: it stops the run within Lease/3. With SQLite, background
// runs stay in the process that accepted them.

// startQueue lets the replicas of a PostgreSQL store share background
// runs: this one stops its own runs that another replica was asked to
// cancel, and takes up those of dead replicas.
func (a *App) startQueue() {
	if !a.store.Postgres() {
		return
	}
	wake := make(chan struct{}, 1)
	a.store.OnSweep(func(ctx context.Context) {
		a.cancelAsked(ctx)
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.takeOrphans(wake)
	}()
	a.closers = append(a.closers, func() error {
		a.store.OnSweep(nil)
		a.cancel() // done already when the app closes; not when it failed to build
		<-done
		return nil
	})
}

// markBackground marks run execID a background run in a PostgreSQL store,
// so that another replica can take it up and cancel it, once the run's
// start and request are committed.
func (a *App) markBackground(execID string) {
	if !a.store.Postgres() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWait)
	defer cancel()
	if err := a.store.MarkBackground(ctx, execID); err != nil {
		a.log.Warn("marking a background run", "exec_id", execID, "err", err)
	}
}

// endBackground queues the end of background run execID: it is no
// longer one to take up or cancel.
func (a *App) endBackground(execID string) {
	if !a.store.Postgres() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWait)
	defer cancel()
	if err := a.store.QueueEndBackground(ctx, execID); err != nil {
		a.log.Warn("ending a background run", "exec_id", execID, "err", err)
	}
}

// storeWait bounds how long marking a background run waits for the store.
const storeWait = 5 * time.Second

// cancelElsewhere asks the replica running background run id, which
// scope sees, to cancel it, and reports whether the run is one (the
// caller then answers with its progress).
func (a *App) cancelElsewhere(ctx context.Context, scope store.Scope, id string) bool {
	ok, err := a.store.RequestCancel(ctx, scope, id)
	if err != nil {
		a.log.Warn("asking another replica to cancel a background run", "exec_id", id, "err", err)
	}
	return ok
}

// cancelAsked stops the background runs this replica runs that another
// replica was asked to cancel.
func (a *App) cancelAsked(ctx context.Context) {
	ids, err := a.store.Cancels(ctx)
	if err != nil {
		a.log.Warn("reading the cancels asked of this replica's background runs", "err", err)
	}
	for _, id := range ids {
		if b := a.bg.get(id); b != nil {
			a.log.Info("cancelling a background run, as asked on another replica", "exec_id", id)
			b.cancel()
		}
	}
}

// takeOrphans takes up the background runs of dead replicas, one at a
// time for as long as it finds them, whenever wake fires (after each
// sweep of the leases, every Lease/3), until the app drains. A run taken
// up waits for a slot of limits.max_concurrent_plans, in its owner's and
// tenant's share: while none frees, taking up stops, and the run taken
// is left to the next taker once the takeover's lease lapsed; likewise
// while its owner, its tenant or this replica holds as many background
// runs as limits.max_background and background_queue_depth allow.
func (a *App) takeOrphans(wake <-chan struct{}) {
	for {
		select {
		case <-a.drain.Done():
			return
		case <-wake:
		}
		for a.drain.Err() == nil && a.takeOne() {
		}
	}
}

// takeOne takes up one background run of a dead replica, and reports
// whether it started it.
func (a *App) takeOne() bool {
	ctx, cancel := context.WithTimeout(a.drain, storeWait)
	defer cancel()
	orphans, err := a.store.TakeOrphans(ctx, 1)
	if err != nil {
		a.log.Warn("taking up the background runs of dead replicas", "err", err)
	}
	if len(orphans) == 0 {
		return false
	}
	o := orphans[0]
	lim := a.Config.Limits
	claim := fairshare.Claim{Owner: "user:" + o.Owner}
	bc := bgClaim{owner: o.Owner, tenant: o.Tenant, ownerMax: lim.MaxBackground, depth: lim.BackgroundQueueDepth}
	var ro orchestrate.RunOptions
	tenant, t := "", config.Tenant{}
	if tt, ok := a.Config.Tenants[o.Tenant]; ok && o.Tenant != "" {
		tenant, t = o.Tenant, tt
		claim.Tenant, claim.TenantMax = o.Tenant, t.Limits.MaxConcurrentPlans
		bc.tenantMax = t.Limits.MaxBackground
	}
	// What its caller could call: its tenant's tools, its own workflows.
	a.narrowTo(o.Owner, tenant, t, &ro)
	// It counts among its owner's and tenant's background runs here, as
	// on the replica that died.
	unreserve, full := a.bgCounts.reserve(bc)
	if full != bgFree {
		a.log.Warn("not taking up a background run of a dead replica yet: its owner, its tenant or this replica holds as many background runs as the limits allow; left to a later taker", "exec_id", o.ExecID)
		return false
	}
	release, err := a.slots.Acquire(ctx, claim)
	if err != nil {
		unreserve()
		a.log.Warn("no slot to take up a background run of a dead replica; left to a later taker", "exec_id", o.ExecID, "err", err)
		return false
	}
	a.plans.add()
	rctx := toolcontext.WithIDs(context.WithoutCancel(ctx), toolcontext.IDs{RequestID: o.RequestID, UserID: o.UserID, Owner: o.Owner, Tenant: o.Tenant})
	ro.Logger = a.log.With("request_id", o.RequestID, "user_id", o.UserID, "tenant", o.Tenant, "exec_id", o.ExecID)
	r := &orchestrate.Request{Resume: &orchestrate.ResumeRequest{ExecID: o.ExecID}}
	a.log.Info("taking up a background run whose replica died", "exec_id", o.ExecID)
	a.goBackground(rctx, a.Engine.With(ro), func(ctx context.Context, e *orchestrate.Engine) *mcp.CallToolResult {
		env := e.Resume(e.Budgeted(ctx, r), r)
		if env.Artifact != nil && len(env.Artifact.ValidationErrors) > 0 {
			// Another replica, or a client's resume, took it first.
			a.log.Info("a background run of a dead replica was taken up elsewhere", "exec_id", o.ExecID, "code", env.Artifact.ValidationErrors[0].Code)
		}
		return orchestrate.ResultFor(env, "")
	}, func() { a.plans.done(); release(); unreserve() })
	return true
}
