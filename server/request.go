package server

import (
	"context"
	"net/http"

	"github.com/google/uuid"
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
		ctx = withRequestID(ctx)
		ids, _ := toolcontext.IDsFrom(ctx)
		ro := orchestrate.RunOptions{Logger: a.log.With("request_id", ids.RequestID)}
		if p := newProgress(ctx, req); p != nil {
			ro.Hooks = p.hooks()
		}
		ro.Hooks = orchestrate.ComposeHooks(ro.Hooks, clientLogHooks(ctx, req, a.secrets, &a.logLevels))
		e := a.Engine.With(ro)
		return e.Handler(orchestrate.HandlerOptions{
			MaxRequestBytes: int(a.Config.Server.MaxRequestBytes),
			Prompt: func(ctx context.Context, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
				return a.prompt(ctx, e, req, r)
			},
		})(ctx, req)
	}
}

// withRequestID gives ctx a request id when it has none, so that every log
// line of the request carries it.
func withRequestID(ctx context.Context) context.Context {
	ids, _ := toolcontext.IDsFrom(ctx)
	if ids.RequestID != "" {
		return ctx
	}
	ids.RequestID = uuid.NewString()
	return toolcontext.WithIDs(ctx, ids)
}

// Run runs a request's plan outside MCP (the CLI's orchestra run), with a
// request id and source recorded as source.
func (a *App) Run(ctx context.Context, req *orchestrate.Request, source string) *orchestrate.Envelope {
	ctx = withRequestID(ctx)
	ids, _ := toolcontext.IDsFrom(ctx)
	return a.Engine.RunWith(ctx, req, orchestrate.RunOptions{Source: source, Logger: a.log.With("request_id", ids.RequestID)})
}

// Reject returns the envelope of a request that cannot run, recorded like
// any run, with source as its source.
func (a *App) Reject(ctx context.Context, issues []*orchestrate.Issue, source string) *orchestrate.Envelope {
	ctx = withRequestID(ctx)
	return a.Engine.With(orchestrate.RunOptions{Source: source}).Reject(ctx, issues)
}

// MetricsHandler serves the app's metrics in the Prometheus text format;
// nil unless Options.Metrics was set.
func (a *App) MetricsHandler() http.Handler { return a.tel.MetricsHandler() }
