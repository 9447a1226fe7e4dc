package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// orchestrateHandler returns the handler of agent_orchestrate. Each request
// gets its own view of the engine (orchestrate.Engine.With) whose runs also
// report to that request's caller: progress notifications when it sent a
// progress token, and logging notifications at the level it asked for.
func (a *App) orchestrateHandler() mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = toolcontext.EnsureRequestID(ctx)
		ctx = withHeaderDepth(ctx, req)
		ctx = withCaller(ctx, req)
		ids, _ := toolcontext.IDsFrom(ctx)
		ro := orchestrate.RunOptions{Logger: a.log.With("request_id", ids.RequestID)}
		if p := newProgress(ctx, req); p != nil {
			ro.Hooks = p.hooks()
		}
		ro.Hooks = orchestrate.ComposeHooks(ro.Hooks, clientLogHooks(ctx, req, a.secrets, &a.logLevels))
		ro.Elicit = elicitFor(req)
		e := a.Engine.With(ro)
		return e.Handler(orchestrate.HandlerOptions{
			MaxRequestBytes: int(a.Config.Server.MaxRequestBytes),
			Prompt: func(ctx context.Context, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
				return a.prompt(ctx, e, req, r)
			},
		})(ctx, req)
	}
}

// withHeaderDepth raises the depth in ctx to the one an HTTP request
// carries in its Orchestra-Depth header: http_request sends it, so that a
// plan that posts to an orchestra's /mcp (a request the _meta of which the
// plan itself writes) cannot reset the count.
func withHeaderDepth(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Extra == nil || req.Extra.Header == nil {
		return ctx
	}
	d, err := strconv.Atoi(req.Extra.Header.Get(toolcontext.HeaderDepth))
	if err != nil || d < 0 || d <= toolcontext.Depth(ctx) {
		return ctx
	}
	return toolcontext.WithDepth(ctx, d)
}

// withCaller records the authenticated caller of req, if any, as the
// user id of its runs: their records belong to it (see ownerScope).
func withCaller(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return ctx
	}
	ids, _ := toolcontext.IDsFrom(ctx)
	ids.UserID = req.Extra.TokenInfo.UserID
	return toolcontext.WithIDs(ctx, ids)
}

// Run runs a request's plan outside MCP (the CLI's orchestra run), with a
// request id and source recorded as source.
func (a *App) Run(ctx context.Context, req *orchestrate.Request, source string) *orchestrate.Envelope {
	ctx = toolcontext.EnsureRequestID(ctx)
	ids, _ := toolcontext.IDsFrom(ctx)
	return a.Engine.RunWith(ctx, req, orchestrate.RunOptions{Source: source, Logger: a.log.With("request_id", ids.RequestID)})
}

// Reject returns the envelope of a request that cannot run, recorded like
// any run, with source as its source.
func (a *App) Reject(ctx context.Context, issues []*orchestrate.Issue, source string) *orchestrate.Envelope {
	ctx = toolcontext.EnsureRequestID(ctx)
	return a.Engine.With(orchestrate.RunOptions{Source: source}).Reject(ctx, issues)
}

// MetricsHandler serves the app's metrics in the Prometheus text format;
// nil unless Options.Metrics was set.
func (a *App) MetricsHandler() http.Handler { return a.tel.MetricsHandler() }
