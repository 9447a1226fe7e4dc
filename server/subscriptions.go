package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/store"
)

// Resource subscriptions: a client subscribes to orchestra://executions/{id}
// (resources/subscribe) and is sent notifications/resources/updated as the
// run's steps end and when it ends (or pauses); it then reads the record.
// The SDK keeps who subscribed to what and sends the notifications; the
// app checks that the caller may read the run, and tells the SDK of
// changes off the runs' paths: a run never waits for a slow client, and a
// burst of step ends becomes one notification per record.
type subscriptions struct {
	mu      sync.Mutex
	watched map[string]int  // subscriptions per record URI
	dirty   map[string]bool // records changed since the notifier last ran
	wake    chan struct{}   // has room for one: the notifier has work
}

func newSubscriptions() *subscriptions {
	return &subscriptions{watched: map[string]int{}, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// subscribe is the server's SubscribeHandler.
func (a *App) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, ExecutionsURI+"/")
	if !ok || id == "" || strings.ContainsAny(id, "/?#") {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("cannot subscribe to %q: only the records of runs, %s/{exec_id}, change as runs go on", uri, ExecutionsURI)}
	}
	scope := tenancy.CallerScope(req.Extra)
	if b := a.bg.get(id); b == nil || !scope.SeesRun(runOf(b.info.Load())) {
		if _, _, err := a.store.GetIn(ctx, scope, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return mcp.ResourceNotFoundError(uri)
			}
			return fmt.Errorf("reading run %s: %w", id, err)
		}
	}
	a.subs.mu.Lock()
	a.subs.watched[uri]++
	a.subs.mu.Unlock()
	return nil
}

// unsubscribe is the server's UnsubscribeHandler.
func (a *App) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	a.subs.mu.Lock()
	defer a.subs.mu.Unlock()
	if a.subs.watched[req.Params.URI]--; a.subs.watched[req.Params.URI] <= 0 {
		delete(a.subs.watched, req.Params.URI)
	}
	return nil
}

// changed marks the record of execID changed, when anyone watches it.
func (s *subscriptions) changed(execID string) {
	uri := RecordURI(execID)
	s.mu.Lock()
	watched := s.watched[uri] > 0
	if watched {
		s.dirty[uri] = true
	}
	s.mu.Unlock()
	if watched {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// hooks mark a run's record changed as its steps end, and as it pauses or
// ends. They run after the recorder's, which queued the writes a read
// waits for.
func (s *subscriptions) hooks() *orchestrate.Hooks {
	return &orchestrate.Hooks{
		StepEnded:   func(i orchestrate.StepEndedInfo) { s.changed(i.Run.ExecID) },
		RunPaused:   func(i orchestrate.RunPausedInfo) { s.changed(i.Run.ExecID) },
		RunFinished: func(i orchestrate.RunFinishedInfo) { s.changed(i.Run.ExecID) },
	}
}

// notify sends the updates of changed records until ctx is done.
func (a *App) notify(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.subs.wake:
		}
		a.subs.mu.Lock()
		uris := make([]string, 0, len(a.subs.dirty))
		for uri := range a.subs.dirty {
			uris = append(uris, uri)
		}
		clear(a.subs.dirty)
		a.subs.mu.Unlock()
		slices.Sort(uris)
		for _, uri := range uris {
			if err := a.Server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				a.log.Debug("notifying a record's subscribers", "uri", uri, "err", err)
			}
		}
	}
}

// runOf is the store's view of a running run, for scope checks.
func runOf(info *orchestrate.RunInfo) *store.Run {
	return &store.Run{ExecID: info.ExecID, Owner: info.IDs.Owner, Tenant: info.IDs.Tenant}
}
