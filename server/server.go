package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/fairshare"
	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/internal/version"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/server/httpedge"
	"github.com/orchestra-mcp/orchestra/server/records"
	"github.com/orchestra-mcp/orchestra/server/runlog"
	"github.com/orchestra-mcp/orchestra/server/secrets"
	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/telemetry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Options configure an App.
type Options struct {
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Version is reported to clients; empty means the binary's own
	// (internal/version).
	Version string
	// Tools are added to the catalog next to the built-in tools (tests use
	// this for fake tools).
	Tools []registry.Tool
	// Store is the execution store's database, or "memory"; empty means the
	// configuration's store.path, and memory when that is empty too.
	Store string
	// Telemetry makes the spans and metrics of runs; nil sets it up from
	// the OTEL_* environment variables (nothing is exported while they are
	// unset), and Close shuts it down.
	Telemetry *telemetry.Telemetry
	// Metrics adds a Prometheus reader to the telemetry New sets up, for
	// MetricsHandler.
	Metrics bool
	// Hooks observe every run of the app, agents' runs and the planner's
	// included, after the app's own (records, insights, logs, telemetry):
	// the command line's live view of a run on a terminal.
	Hooks *orchestrate.Hooks
}

// App is a configured orchestra: the catalog, the engine and the MCP server.
type App struct {
	Config  *config.Config
	Catalog *registry.Catalog
	Engine  *orchestrate.Engine
	Server  *mcp.Server

	log     *slog.Logger
	drain   context.Context // cancelled to cancel every running plan
	cancel  context.CancelFunc
	plans   inflight
	slots   *fairshare.Pool // limits.max_concurrent_plans, shared fairly by owner and tenant
	mu      sync.Mutex
	exposed map[string]bool // tool names listed to clients next to agent_orchestrate
	closers []func() error
	planner *plannerSetup
	// tenantPlanners are the planners of the tenants' prompts, by tenant.
	tenantPlanners map[string]*tenantPlanner
	tokens         *httpedge.Tokens // nil without HTTP authentication
	store          *store.Store
	tel            *telemetry.Telemetry
	secrets        []string // never logged to clients

	bg        bgRuns         // background runs
	bgCounts  bgCounts       // background runs by owner and tenant, for their limits
	subs      *subscriptions // resource subscriptions
	logLevels runlog.Levels  // which clients receive logging notifications
	calls     httpedge.Calls // tools/call requests in flight over HTTP

	workers   builtin.Workers   // the worker processes of json_query and render
	listeners builtin.Listeners // the addresses ServeHTTP serves on, which http_request refuses

	downstream *mcpserver.Manager // nil without mcpServers
	agents     []*agents.Agent    // the configured agents, sorted by name
}

// New builds an App from a configuration.
func New(ctx context.Context, cfg *config.Config, opts Options) (*App, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = version.String()
	}
	cat := registry.NewCatalog()
	a := &App{Config: cfg, Catalog: cat, log: log, exposed: map[string]bool{}, subs: newSubscriptions()}
	a.closers = append(a.closers, a.workers.Close) // the last to close
	builtins := append(builtin.Tools(cfg.Builtins, builtin.Options{Workers: &a.workers, Listeners: &a.listeners}), builtin.AskUser())
	for i := range builtins {
		builtins[i].Source = "builtin"
	}
	if err := cat.Add(builtins...); err != nil {
		return nil, err
	}
	if err := cat.Add(opts.Tools...); err != nil {
		return nil, err
	}
	a.slots = fairshare.New(fairshare.Options{Slots: cfg.Limits.MaxConcurrentPlans, OwnerShare: cfg.Limits.PlansPerOwner, TenantShare: cfg.Limits.PlansPerTenant})
	tokens, err := httpedge.LoadTokens(cfg.Server.Auth, tenancy.NewTable(cfg.Tenants), os.LookupEnv)
	if err != nil {
		return nil, err
	}
	a.tokens = tokens
	a.drain, a.cancel = context.WithCancel(context.Background())
	if a.store, err = openStore(ctx, cfg, opts.Store, log); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.store.Close)
	built := false
	defer func() {
		if !built { // release the store and telemetry of an app that failed to build
			for i := len(a.closers) - 1; i >= 0; i-- {
				a.closers[i]()
			}
		}
	}()
	if tokens != nil {
		// Records written before owners were namespaced by how their
		// caller authenticated are given their namespaced owner.
		if n, err := a.store.RenameOwners(ctx, tokens.LegacyOwner); err != nil {
			return nil, err
		} else if n > 0 {
			log.Info("records' owners namespaced by how their callers authenticate", "owners", n)
		}
	}
	a.tel = opts.Telemetry
	if a.tel == nil {
		if a.tel, err = telemetry.New(ctx, telemetry.Options{Prometheus: opts.Metrics, Version: opts.Version, Logger: log}); err != nil {
			return nil, err
		}
		a.closers = append(a.closers, func() error { return a.tel.Shutdown(context.Background()) })
	}
	a.secrets = secrets.Of(cfg)
	// A plan may never start an orchestration on its own server.
	forbidden := func(name string) bool { return name == orchestrate.ToolName }
	learned := records.NewLessons(a.store, log)
	// The engine's hooks feed the records, the insights, the logs and the telemetry,
	// then the caller's; requests add progress and client logs (orchestrateHandler).
	a.Engine = orchestrate.NewEngine(orchestrate.Options{
		Tools:       a.tel.Tools(cat),
		Limits:      cfg.EngineLimits(),
		Logger:      log,
		Forbidden:   forbidden,
		Hooks:       orchestrate.ComposeHooks(records.NewRecorder(a.store, log).Hooks(), learned.Hooks(), runlog.Hooks(log), a.tel.Hooks(), a.subs.hooks(), opts.Hooks),
		StepContext: a.tel.StepContext,
		Record:      RecordURI,
		Redact:      func(s string) string { return secrets.Redact(s, a.secrets) },
		Response:    cfg.Server.Response,
		Pauses:      records.NewPauses(a.store, log),
		ClientFinal: clientFinal(cfg.ClientFinalTools),
	})
	if a.planner, err = newPlanner(cfg, cat, a.Engine, forbidden, learned, log); err != nil {
		return nil, err
	}
	if a.tenantPlanners, err = newTenantPlanners(cfg, cat, a.Engine, forbidden, a.planner, log); err != nil {
		return nil, err
	}
	if err := a.addAgents(); err != nil {
		return nil, err
	}
	a.Server = mcp.NewServer(&mcp.Implementation{Name: "orchestra", Title: "orchestra", Version: opts.Version}, &mcp.ServerOptions{
		Instructions:       "orchestra runs whole multi-step tool plans in one call: use agent_orchestrate instead of calling tools one at a time.",
		Logger:             log,
		Capabilities:       &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
		SubscribeHandler:   a.subscribe,
		UnsubscribeHandler: a.unsubscribe,
	})
	go a.notify(a.drain)
	a.addResources()
	a.addInsightsResource()
	a.Server.AddReceivingMiddleware(a.unknownTools, a.tenantTools, a.logLevels.Middleware)
	a.sync()
	cat.OnChange(a.sync)
	a.startDownstream(ctx, opts.Version)
	built = true
	return a, nil
}

// openStore opens the execution store at path: opts.Store, else the
// configuration's store.path, else memory.
func openStore(ctx context.Context, cfg *config.Config, path string, log *slog.Logger) (*store.Store, error) {
	if path == "" {
		path = cfg.Store.Path
	}
	if path == "" {
		path = store.Memory
	}
	// A server asked to stop as it starts still opens its store: it
	// recovers the runs a crash left and closes cleanly.
	return store.Open(context.WithoutCancel(ctx), path, store.Options{
		Retention: store.Retention{MaxAge: cfg.Store.Retention.MaxAge.D(), MaxRuns: cfg.Store.Retention.MaxRuns},
		Logger:    log,
		Lease:     cfg.Store.Lease.D(),
	})
}

// Store returns the app's execution store.
func (a *App) Store() *store.Store { return a.store }

// clientFinal returns whether the configuration marks a tool client-final
// (client_final_tools, globs over tool names).
func clientFinal(globs []string) func(string) bool {
	if len(globs) == 0 {
		return nil
	}
	return func(name string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, name); ok {
				return true
			}
		}
		return false
	}
}

// unknownTools answers a call of a tool the server does not list with an
// error that names the closest listed tools, rather than the SDK's bare
// "unknown tool".
func (a *App) unknownTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.CallToolRequest)
		if !ok || r.Params == nil {
			return next(ctx, method, req)
		}
		name := r.Params.Name
		allow := a.callerTools(r.Extra) // a tenant's caller is told only of its tools
		a.mu.Lock()
		listed := name == orchestrate.ToolName || name == DiscoveryToolName || a.exposed[name]
		var names []string // for the message, so only for an unlisted tool
		if !listed {
			names = append(names, orchestrate.ToolName)
			for n := range a.exposed {
				if allow == nil || allow(n) {
					names = append(names, n)
				}
			}
		}
		a.mu.Unlock()
		if listed {
			return next(ctx, method, req)
		}
		slices.Sort(names)
		msg := fmt.Sprintf("unknown tool %q", name)
		if _, inCatalog := a.Catalog.Lookup(name); inCatalog && (allow == nil || allow(name)) {
			msg = fmt.Sprintf("tool %q is not listed to clients; call it from a plan step of %s", name, orchestrate.ToolName)
		} else if s := suggest.Closest(name, names, 3); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s? tools/list shows every tool", quoteAll(s))
		} else {
			msg += "; the tools are " + strings.Join(names, ", ")
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	}
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, " or ")
}

// sync brings the server's tool list in line with the catalog: the
// description of agent_orchestrate lists the current tools, and exposed
// tools are added and removed.
func (a *App) sync() {
	a.mu.Lock()
	defer a.mu.Unlock()
	tools := a.Catalog.List()
	want := map[string]bool{}
	var unlisted []registry.Tool
	for _, t := range tools {
		if !a.expose(t) {
			unlisted = append(unlisted, t)
			continue
		}
		want[t.Name] = true
		a.Server.AddTool(mcpTool(t), a.passthrough(t))
	}
	a.Server.AddTool(orchestrate.MCPTool(unlisted), a.track(a.orchestrateHandler()))
	a.syncDiscovery(len(unlisted) > 0)
	var gone []string
	for name := range a.exposed {
		if !want[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		a.Server.RemoveTools(gone...)
	}
	a.exposed = want
}

// track counts running plans and runs them in their call's context
// (callContext: cancelled when the app drains or the HTTP client goes).
// Each takes one of limits.max_concurrent_plans slots, shared fairly
// (package fairshare): a caller and a tenant hold their share, more only
// while others' stay free; a call that may not take one waits up to
// limits.queue_timeout, served before the calls of callers that hold
// more, then fails with the code busy.
func (a *App) track(h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if isControl(req) {
			// An await or a cancel runs nothing: it takes no slot.
			ctx, stop := a.callContext(ctx, req)
			defer stop()
			return h(ctx, req)
		}
		qctx, cancel := context.WithTimeout(ctx, a.Config.Limits.QueueTimeout)
		release, err := a.slots.Acquire(qctx, a.slotClaim(req))
		cancel()
		if err != nil {
			return orchestrate.ResultFor(a.Engine.Reject(ctx, []*orchestrate.Issue{{Code: orchestrate.CodeBusy, Message: err.Error() + ": retry in a moment, or raise the limit in the configuration file"}}), req.ProtocolVersion()), nil
		}
		a.plans.add()
		// A background run takes the slot over (startBackground).
		held := &heldSlot{release: func() { a.plans.done(); release() }}
		defer held.done()
		if issue := a.Engine.Admit(); issue != nil {
			return orchestrate.ResultFor(a.Engine.Reject(ctx, []*orchestrate.Issue{issue}), req.ProtocolVersion()), nil
		}
		ctx, stop := a.callContext(ctx, req)
		defer stop()
		return h(context.WithValue(ctx, heldSlotKey{}, held), req)
	}
}

// isControl reports whether req is an await or a cancel of a background
// run: a small object with one of those keys. It only routes the call;
// the handler decodes the request, and refuses a malformed one.
func isControl(req *mcp.CallToolRequest) bool {
	if req.Params == nil || len(req.Params.Arguments) > maxControlBytes {
		return false
	}
	var probe struct {
		Await  json.RawMessage `json:"await"`
		Cancel json.RawMessage `json:"cancel"`
	}
	if json.Unmarshal(req.Params.Arguments, &probe) != nil {
		return false
	}
	return probe.Await != nil || probe.Cancel != nil
}

// maxControlBytes is larger than any await or cancel.
const maxControlBytes = 1024

// slotClaim is who asks for a plan's slot: the caller's user id, else its
// session; its tenant and the tenant's own cap.
func (a *App) slotClaim(req *mcp.CallToolRequest) fairshare.Claim {
	var c fairshare.Claim
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		c.Owner = "user:" + req.Extra.TokenInfo.UserID
		if name, t, ok := a.tenant(req.Extra.TokenInfo); ok {
			c.Tenant, c.TenantMax = name, t.Limits.MaxConcurrentPlans
		}
	} else if req.Session != nil {
		c.Owner = "session:" + req.Session.ID()
	}
	return c
}

// InFlight returns how many plans are running.
func (a *App) InFlight() int { return a.plans.count() }

// inflight counts running plans; idle's channel is closed while none runs.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.zero)
	}
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *inflight) idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return f.zero
}

// cancelPlans cancels every running plan.
func (a *App) cancelPlans() { a.cancel() }

// expose reports whether t is listed to clients directly.
func (a *App) expose(t registry.Tool) bool {
	if !a.Config.Server.ExposeDownstreamTools() || t.Mode == registry.ClientFinal {
		return false // ask_user and its kind run only inside plans
	}
	if t.Source == "builtin" {
		return a.Config.Server.ExposeBuiltinTools()
	}
	if t.Source == agents.Source {
		return a.exposedAgent(t)
	}
	if a.downstream != nil {
		return a.downstream.Exposed(t.Name)
	}
	return true
}

// mcpTool returns the MCP definition of a catalog tool.
func mcpTool(t registry.Tool) *mcp.Tool {
	mt := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, Annotations: t.Annotations}
	if t.InputSchema != nil {
		mt.InputSchema = schemas.PortableInputOr(t.InputSchema)
	} else {
		mt.InputSchema = map[string]any{"type": "object"}
	}
	if t.OutputSchema != nil {
		mt.OutputSchema = schemas.PortableOr(t.OutputSchema)
	}
	return mt
}

// passthrough calls a catalog tool for a client that calls it directly.
// What the request's _meta carries goes on: the depth (one more than the
// caller's, so that a chain of orchestras calling each other's tools
// directly stops at limits.max_depth like a chain of plans; a downstream
// tool called at that depth is refused with depth_exceeded), the
// traceparent, the caller's ids (toolcontext.CallIDs), and progress, which the tool's reports answer under the
// caller's progress token.
func (a *App) passthrough(t registry.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, cancel := a.callContext(ctx, req)
		defer cancel()
		ctx = toolcontext.FromMeta(ctx, req.Params.GetMeta())
		// The caller's ids go on to the tool (an agent's, a downstream
		// server's _meta), as from a plan.
		ctx = toolcontext.EnsureRequestID(withCaller(withCallerIDs(ctx, req), req))
		// A built-in tool runs here and starts nothing; a downstream call
		// is one more hop, possibly into another orchestra.
		if d, limit := toolcontext.Depth(ctx), a.Config.Limits.MaxDepth; d >= limit && t.Source != "builtin" {
			res := &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("%s: orchestration depth %d reached the limit of %d (limits.max_depth, code %s): orchestras calling each other's tools may not nest this deep", t.Name, d+1, limit, orchestrate.CodeDepthExceeded))
			return res, nil
		}
		ctx = toolcontext.WithDepth(ctx, toolcontext.Depth(ctx)+1)
		ctx = withAgentCaller(ctx, req) // an exposed agent may sample the caller's model
		// An exposed agent's runs draw from one budget, its caller's
		// tenant's when it has one.
		var ro orchestrate.RunOptions
		ctx, _, _ = a.withTenant(ctx, req, &ro)
		ctx = a.Engine.With(ro).Budgeted(ctx, nil)
		args, err := decodeArgs(req.Params.Arguments)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("arguments of %s: %w; send a JSON object", t.Name, err))
			return res, nil
		}
		cr := &registry.CallRequest{Arguments: args}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			// A report can arrive just after the result: send it all the same.
			nctx := context.WithoutCancel(ctx)
			cr.Progress = func(p registry.Progress) {
				_ = req.Session.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p.Progress, Total: p.Total, Message: p.Message})
			}
		}
		r, err := t.Invoke(ctx, cr)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("calling %s: %w", t.Name, err))
			return res, nil
		}
		res := &mcp.CallToolResult{Content: r.Content, StructuredContent: r.Structured, IsError: r.IsError}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return res, nil
	}
}

// ServeStdio serves one client over stdin and stdout until the client goes
// away or ctx is done. When stdin ends, the requests already read are
// answered first. When ctx is done (SIGTERM), it stops reading, lets
// running requests finish for the configured grace period (none when
// stdin has already ended: a client that closed stdin and then signals
// wants the process gone), cancels what is still running (a cancelled plan
// answers with its partial results), waits a bounded time for those
// answers, and returns: a client that stopped reading stdout cannot hold
// the process.
func (a *App) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	t := &lineTransport{in: in, out: out, maxLine: int(a.Config.Server.MaxRequestBytes), gate: a.Config.Server.RequestGate()}
	// The session outlives ctx by the grace period.
	ss, err := a.Server.Connect(context.WithoutCancel(ctx), t, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, io.EOF)) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	conn := t.conn
	conn.stopReading()
	grace := a.Config.Server.ShutdownGrace
	if conn.inputEnded.Load() {
		// The client closed stdin and now asks the process to end: it is
		// not waiting for more, so what still runs is cancelled at once.
		grace = 0
	}
	a.log.Info("shutting down", "in_flight_plans", a.InFlight(), "grace", grace)
	// Background runs have no request: their count is the plans'.
	if !waitFor(bothIdle(conn.idle(), a.plans.idle()), grace) {
		a.log.Warn("cancelling requests still running after the grace period", "in_flight_plans", a.InFlight())
		a.cancelPlans()
		if !waitFor(bothIdle(conn.idle(), a.plans.idle()), cancelWait) {
			a.log.Warn("closing with requests unanswered")
		}
	}
	// Closing waits for a write in progress, which a client that stopped
	// reading stdout never lets finish: wait a bounded time.
	closed := make(chan struct{})
	go func() {
		ss.Close()
		<-ended
		close(closed)
	}()
	if !waitFor(closed, time.Second) {
		a.log.Warn("the stdio session did not end; stdout may be full")
	}
	return nil
}

// Close releases what the app holds: client sessions (HTTP sessions
// otherwise live until they time out), downstream servers and stores.
func (a *App) Close() error {
	a.cancel()
	a.closeSessions()
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	return errors.Join(errs...)
}

// closeSessions ends every client session of the server. Closing a session
// waits for a write in progress, which a client that stopped reading never
// lets finish: it waits a bounded time for them all.
func (a *App) closeSessions() {
	var wg sync.WaitGroup
	for ss := range a.Server.Sessions() {
		wg.Go(func() { ss.Close() })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	if !waitFor(done, sessionCloseWait) {
		a.log.Warn("client sessions did not close; a client may have stopped reading")
	}
}

// sessionCloseWait bounds how long closing waits for client sessions.
const sessionCloseWait = 2 * time.Second

func decodeArgs(raw []byte) (map[string]any, error) {
	args := map[string]any{}
	if len(raw) == 0 || string(raw) == "null" {
		return args, nil
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, err
	}
	return args, nil
}
