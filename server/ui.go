package server

import (
	"context"
	"net/http"

	"github.com/orchestra-mcp/orchestra/server/httpedge"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/viewer"
)

// viewerHandler returns the web viewer of the app's records, served under
// /ui/: it authenticates callers as /mcp does (static bearer tokens, OAuth
// access tokens) and shows each its own runs within its tenant, as
// CallerScope does; without server.auth it shows every run, as to the
// machine's own callers.
func (a *App) viewerHandler() (http.Handler, error) {
	opts := viewer.Options{Records: a.store, Logger: a.log}
	if a.tokens != nil {
		opts.Authenticate = func(ctx context.Context, token string) (viewer.Identity, error) {
			ti, err := a.tokens.Verify(ctx, token)
			if err != nil {
				return viewer.Identity{}, err
			}
			return viewer.Identity{Name: httpedge.UserOf(ti), Scope: store.OwnerScope(ti.UserID).InTenant(tenancy.Of(ti)), Expires: ti.Expiration}, nil
		}
	}
	return viewer.New(opts)
}
