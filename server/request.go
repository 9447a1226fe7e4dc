package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server/httpedge"
	"github.com/orchestra-mcp/orchestra/server/progress"
	"github.com/orchestra-mcp/orchestra/server/runlog"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// orchestrateHandler returns the handler of agent_orchestrate. Each request
// gets its own view of the engine (orchestrate.Engine.With) whose runs also
// report to that request's caller: progress notifications when it sent a
// progress token, and logging notifications at the level it asked for.
func (a *App) orchestrateHandler() mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = withCallerIDs(ctx, req)
		ctx = a.withTrace(ctx, req)
		ctx = toolcontext.EnsureRequestID(ctx)
		ctx = withHeaderDepth(ctx, req)
		ctx = withCaller(ctx, req)
		ctx = withAgentCaller(ctx, req)
		var ro orchestrate.RunOptions
		ctx, tenant, inTenant := a.withTenant(ctx, req, &ro)
		ids, _ := toolcontext.IDsFrom(ctx)
		ro.Logger = a.log.With("request_id", ids.RequestID, "user_id", ids.UserID, "tenant", ids.Tenant)
		// A background run reports to no one in particular (its caller
		// may be gone): what a waiting caller sees, progress and logs,
		// and what it answers, elicitation, are the foreground's.
		idem, issue := a.idempotencyOf(ctx, req)
		if idem != nil {
			ro.Hooks = orchestrate.ComposeHooks(ro.Hooks, a.idempotencyHooks(idem))
		}
		base := a.Engine.With(ro)
		fg := orchestrate.RunOptions{Elicit: elicitFor(req)}
		if p := progress.For(ctx, req); p != nil {
			fg.Hooks = p.Hooks()
		}
		fg.Hooks = orchestrate.ComposeHooks(fg.Hooks, runlog.ClientHooks(ctx, req, a.secrets, &a.logLevels))
		fg.AskOnPause = asksOnPause(req)
		e := base.With(fg)
		if issue != nil {
			return a.resultFor(req, e.Reject(ctx, []*orchestrate.Issue{issue})), nil
		}
		if fg.AskOnPause {
			// The answers to ask_user's input requests resume their run.
			switch answered, err := a.askAnswers(req); {
			case err == nil:
				req = answered
			case !errors.Is(err, errNotAskState):
				return a.refuseAskState(ctx, e, req, err), nil
			}
		}
		handle := e.Handler(orchestrate.HandlerOptions{
			MaxRequestBytes: int(a.Config.Server.MaxRequestBytes),
			Gate:            a.Config.Server.RequestGate(),
			Prompt: func(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
				if inTenant && !tenant.Planning() {
					return planningDisabled(ctx, e)
				}
				conv, ok := conversationOf(ctx, req, r)
				if !ok {
					res, _ := a.prompt(ctx, e, req, r)
					return res
				}
				goal := r.Prompt // the caller's, without the history added to r
				res, env := a.prompt(a.withConversation(ctx, conv, r), e, req, r)
				a.appendTurn(ctx, conv, goal, env)
				return res
			},
			Finished: a.finishRun,
			Background: func(ctx context.Context, req *mcp.CallToolRequest, r *orchestrate.Request, start orchestrate.StartFunc) *mcp.CallToolResult {
				return a.startBackground(ctx, req, base, start)
			},
			Control: func(ctx context.Context, req *mcp.CallToolRequest, r *orchestrate.Request) *mcp.CallToolResult {
				return a.control(ctx, base, req, r)
			},
			Result:   a.resultFor,
			Fallback: a.resumeFallback,
		})
		if idem != nil {
			return a.idempotent(ctx, e, req, idem, handle)
		}
		return handle(ctx, req)
	}
}

// callContext returns the context a tool call runs in: it ends when the
// app drains (shutdown), and, for a call that arrived over HTTP, when the
// client drops the connection or cancels the call.
func (a *App) callContext(ctx context.Context, req *mcp.CallToolRequest) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stopDrain := context.AfterFunc(a.drain, cancel)
	stopHTTP := func() bool { return false }
	if httpCtx, ok := a.calls.Context(req); ok {
		stopHTTP = context.AfterFunc(httpCtx, cancel)
	}
	return ctx, func() { stopHTTP(); stopDrain(); cancel() }
}

// elicitFor returns how ask_user asks the user of req's client: MCP
// elicitation, when the client declared it and its protocol lets a tool
// handler send requests (before 2026-07-28); nil otherwise, and ask_user
// then pauses the run for the client to answer.
func elicitFor(req *mcp.CallToolRequest) orchestrate.Elicit {
	if req == nil || req.Session == nil {
		return nil
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil || ip.ProtocolVersion == "" || ip.ProtocolVersion >= "2026-07-28" {
		return nil
	}
	ss := req.Session
	return func(ctx context.Context, message string, schema map[string]any) (string, map[string]any, error) {
		if schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: schema})
		if err != nil {
			return "", nil, err
		}
		return res.Action, res.Content, nil
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

// withCallerIDs takes the request and context ids a caller sent in the
// request's _meta (toolcontext.MetaRequestID, MetaContextID), so that its
// runs carry the caller's own ids; a value that is not a short printable
// string is ignored and the id generated as without one.
func withCallerIDs(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Params == nil {
		return ctx
	}
	meta := req.Params.GetMeta()
	ids, _ := toolcontext.IDsFrom(ctx)
	changed := false
	for key, dst := range map[string]*string{toolcontext.MetaRequestID: &ids.RequestID, toolcontext.MetaContextID: &ids.ContextID} {
		if v, ok := meta[key].(string); ok && validCallerID(v) {
			*dst, changed = v, true
		}
	}
	if !changed {
		return ctx
	}
	return toolcontext.WithIDs(ctx, ids)
}

// withTrace gives a request its own trace when tracing is on and the
// caller sent no traceparent: the run's spans join it, and its envelope's
// trace_id names it. (A caller's traceparent gives its trace id instead.)
func (a *App) withTrace(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if !a.tel.Tracing() || req.Params == nil {
		return ctx
	}
	if tp, ok := req.Params.GetMeta()[toolcontext.MetaTraceparent].(string); ok && tp != "" {
		return ctx
	}
	if _, ok := toolcontext.TraceparentFrom(ctx); ok {
		return ctx
	}
	var b [24]byte
	rand.Read(b[:])
	traceID, spanID := hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	ids, _ := toolcontext.IDsFrom(ctx)
	ids.TraceID = traceID
	return toolcontext.WithTraceparent(toolcontext.WithIDs(ctx, ids), "00-"+traceID+"-"+spanID+"-01")
}

// validCallerID accepts ids of 1 to 128 printable ASCII characters.
func validCallerID(s string) bool { return toolcontext.ValidID(s, toolcontext.MaxContextIDBytes) }

// withCaller records the authenticated caller of req, if any, as the
// owner of its runs (their records belong to it, see tenancy.CallerScope)
// and its user id.
func withCaller(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return ctx
	}
	ids, _ := toolcontext.IDsFrom(ctx)
	ids.Owner, ids.UserID = req.Extra.TokenInfo.UserID, httpedge.UserOf(req.Extra.TokenInfo)
	return toolcontext.WithIDs(ctx, ids)
}

// Run runs a request's plan outside MCP (the CLI's orchestra run), with a
// request id and source recorded as source.
func (a *App) Run(ctx context.Context, req *orchestrate.Request, source string) *orchestrate.Envelope {
	ctx = toolcontext.EnsureRequestID(ctx)
	ids, _ := toolcontext.IDsFrom(ctx)
	e := a.Engine.With(orchestrate.RunOptions{Source: source, Logger: a.log.With("request_id", ids.RequestID)})
	if p, err := a.Planner(); err == nil && req.Resume != nil {
		// A run paused in its planner's reactive fallback goes on with it.
		e = e.WithFallback(p.WithEngine(e).ResumeFallback())
	}
	return e.Run(ctx, req)
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
