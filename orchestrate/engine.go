package orchestrate

import (
	"bufio"
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Options configure an Engine.
type Options struct {
	// Tools is the catalog plans call into.
	Tools Tools
	// Limits bound every run; zero fields take the defaults.
	Limits Limits
	// Forbidden reports tools a plan may not call (the orchestrate tool itself).
	Forbidden func(name string) bool
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Hooks observe every run: see [Hooks] for what they are told, and when.
	Hooks *Hooks
	// ToolName is recorded in _metadata.tool_name; default "agent_orchestrate".
	ToolName string
	// NewID makes exec ids; default random UUIDs.
	NewID func() string
	// Record, when set, names the execution record of a run, given its exec
	// id, in the envelope's _metadata.record.
	Record func(execID string) string
	// Redact, when set, cuts secrets out of the messages of errors before
	// anything sees them: the envelope, the observers, the records. A
	// tool's or a model provider's error may quote a credential.
	Redact func(string) string
	// StepContext, when set, returns the context a tool step's tool is
	// called with (every attempt), derived from ctx: tracing puts the step's
	// span there. It runs on the step's goroutine after the step started.
	StepContext func(ctx context.Context, run *RunInfo, step *StepRecord) context.Context
	// Pauses keeps paused runs and what resuming a run needs; nil keeps
	// paused runs in memory.
	Pauses PauseStore
	// ClientFinal, when set, reports catalog tools that the client runs:
	// a plan pauses at them as at the request's client tools.
	ClientFinal func(name string) bool
	// Response is the response of a request that names none: "compact"
	// (the default) or "full".
	Response string
}

// RunOptions add to an engine's options for the runs of one request: what
// only that request's caller wants to see, such as progress notifications.
type RunOptions struct {
	// Hooks observe these runs, after the engine's own.
	Hooks *Hooks
	// Logger replaces the engine's logger, e.g. with the request's ids.
	Logger *slog.Logger
	// Source says what started the runs ("agent_orchestrate", "cli");
	// default the engine's tool name. Hooks read it in RunInfo.
	Source string
	// Elicit, when set, asks the request's user: ask_user uses it instead
	// of pausing.
	Elicit Elicit
	// AskOnPause says that the caller asks its user the questions of
	// ask_user when the run pauses for them (on MCP 2026-07-28, through the
	// protocol's input requests): ask_user then pauses whatever its
	// if_no_user says. Without it or Elicit, no user can be asked, and
	// ask_user fails with user_unavailable unless it asks to pause.
	AskOnPause bool
	// AllowTool, when set, narrows the catalog of these runs to the tools
	// it allows (a tenant's, an agent's): a plan calling another is
	// refused at plan time with unknown_tool. Their budget nodes carry it,
	// so that what runs under them (an agent's nested plan) can call no
	// other tool either.
	AllowTool func(name string) bool
	// ToolFor, when set, gives these runs' own definition of some tools
	// (the caller's workflows, whose names other callers may use for
	// theirs): where it answers, plans are checked against its tool, not
	// the catalog's. AllowTool still decides what may be called.
	ToolFor func(name string) (registry.Tool, bool)
	// Limits, when set, lower the engine's limits for these runs; a field
	// above the engine's, or zero, keeps the engine's.
	Limits *Limits
}

// RunInfo identifies a run for its hooks.
type RunInfo struct {
	ExecID    string
	IDs       toolcontext.IDs
	Depth     int
	Leaves    int   // tool steps in the plan; known from PlanReady on the prompt path, and a child run's (its steps) at its end
	Plan      *Plan // the plan; known from PlanReady on the prompt path
	StartedAt time.Time
	// Source says what started the run; see RunOptions.Source.
	Source string
	// Traceparent is the W3C trace context the run was called with, if any.
	Traceparent string
	// ParentExecID is the run this one was started under, if any: the run
	// of the plan whose agent step or nested orchestration started it.
	ParentExecID string
	// Goal is the request's prompt on the prompt path; "" for a plan.
	Goal string

	added atomic.Int64 // tool steps loops added to Leaves as their arrays resolved
}

// Steps returns how many tool steps the run makes: Leaves, with each loop's
// body counted once per element once the loop's array resolved (and not at
// all when it resolved empty, or the loop ended without running). Progress
// reaches it when every step ended.
func (i *RunInfo) Steps() int { return i.Leaves + int(i.added.Load()) }

// grow adds n (which may be negative) to the steps of the run.
func (i *RunInfo) grow(n int) {
	if n != 0 {
		i.added.Add(int64(n))
	}
}

// Engine validates and runs plans. It is safe for concurrent use.
type Engine struct {
	opts   Options
	lim    Limits
	log    *slog.Logger
	source string
	mem    *serverMemory // shared by the engines With makes
	// allow, when set, is what the engine's runs may call (RunOptions'
	// AllowTool, intersected): their budget nodes carry it, so that work
	// nested under them can call no more.
	allow func(name string) bool
	// principal marks the engine of a child run (StartChild): its node
	// acts with the tools allow names rather than its caller's.
	principal  bool
	hooks      *Hooks // opts.Hooks and the request's, composed; never nil
	pauses     PauseStore
	elicit     Elicit // the request's
	askOnPause bool   // the request's caller asks its user on a pause
	// fallback goes on with a run paused in its planner's fallback
	// (WithFallback); nil: such a run cannot be resumed here.
	fallback *Fallback
	// transition, when set, sees every move of every run's state machine:
	// the engine's own tests compare the paths with the design's.
	transition fsm.Observer
}

// NewEngine returns an engine.
func NewEngine(opts Options) *Engine {
	if opts.ToolName == "" {
		opts.ToolName = "agent_orchestrate"
	}
	if opts.NewID == nil {
		opts.NewID = newUUIDs().next
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Tools == nil {
		opts.Tools = registry.NewCatalog()
	}
	hooks := opts.Hooks
	if hooks == nil {
		hooks = noHooks
	}
	lim := opts.Limits.WithDefaults()
	pauses := opts.Pauses
	if pauses == nil {
		pauses = &memoryPauses{}
	}
	return &Engine{opts: opts, lim: lim, log: log, source: opts.ToolName, mem: newServerMemory(lim.MaxMemoryBytes), hooks: hooks, pauses: pauses}
}

// With returns an engine that shares e's catalog and limits and whose runs
// also apply ro. It is cheap: make one per request.
func (e *Engine) With(ro RunOptions) *Engine {
	c := *e
	if ro.Hooks != nil {
		c.hooks = ComposeHooks(e.hooks, ro.Hooks)
	}
	if ro.Logger != nil {
		c.log = ro.Logger
	}
	if ro.Source != "" {
		c.source = ro.Source
	}
	if ro.ToolFor != nil {
		c.opts.Tools = viewTools{c.opts.Tools, ro.ToolFor}
	}
	if ro.AllowTool != nil {
		c.opts.Tools = allowedTools{c.opts.Tools, ro.AllowTool}
		if prev := c.allow; prev != nil {
			c.allow = func(name string) bool { return prev(name) && ro.AllowTool(name) }
		} else {
			c.allow = ro.AllowTool
		}
	}
	if ro.Limits != nil {
		c.lim = c.lim.Lower(*ro.Limits)
	}
	if ro.Elicit != nil {
		c.elicit = ro.Elicit
	}
	if ro.AskOnPause {
		c.askOnPause = true
	}
	return &c
}

// RunWith is Run with the options of one request.
func (e *Engine) RunWith(ctx context.Context, req *Request, ro RunOptions) *Envelope {
	return e.With(ro).Run(ctx, req)
}

// RunPromptWith is RunPrompt with the options of one request.
func (e *Engine) RunPromptWith(ctx context.Context, req *Request, plan PlanFunc, ro RunOptions) *Envelope {
	return e.With(ro).RunPrompt(ctx, req, plan)
}

// Limits returns the engine's limits.
func (e *Engine) Limits() Limits { return e.lim }

// Validate checks a request's plan against every plan-time rule.
func (e *Engine) Validate(req *Request) *Validation {
	if req.Plan == nil {
		return &Validation{Errors: []*Issue{{Code: CodeInvalidRequest, Message: "the request has no plan to validate"}}, Warnings: []*Issue{}}
	}
	tools, issues := withClientTools(e.opts.Tools, req.ClientTools)
	v := validate(req.Plan, tools, e.lim.forRequest(req), req.Bindings, e.opts.Forbidden)
	v.Errors = append(v.Errors, issues...)
	return v
}

// Run validates and runs the request's plan, or continues the run its
// resume names (see [Engine.Resume]), and returns the envelope. It
// never panics and always returns an envelope; a plan that did not succeed
// says why in it.
func (e *Engine) Run(ctx context.Context, req *Request) *Envelope {
	if req.Resume != nil {
		return e.Resume(ctx, req)
	}
	r := e.newRun(ctx, req)
	return r.run(ctx, nil)
}

// PlanFunc produces a plan for a run of the prompt path. It runs with the
// state machine in planner_active.
type PlanFunc func(ctx context.Context) (*Plan, *PlannerInfo, []*Issue, error)

// RunPrompt runs the prompt path: plan() is called in planner_active, its
// plan validated and run like any other. A planner error fails the run
// straight away.
func (e *Engine) RunPrompt(ctx context.Context, req *Request, plan PlanFunc) *Envelope {
	r := e.newRun(ctx, req)
	return r.run(ctx, plan)
}

// Fallback takes a prompt run over when its planner fails (the planner's
// reactive fallback): a tool loop makes the run's steps in the plan's
// place, and the run ends as the loop does. The run stays one run, with one
// record.
type Fallback struct {
	// Applies reports whether the fallback takes over after the planner
	// failed with err; without it the run fails.
	Applies func(err error) bool
	// Run makes the run's steps through c (ChildRun.Call and Step) and
	// ends the run with c.Finish or c.FinishWith, whose envelope it
	// returns.
	Run func(ctx context.Context, c *ChildRun, err error) *Envelope
	// Resume goes on with the fallback's loop that paused its run for the
	// client ([ChildRun.PauseFallback]): cont holds the loop's state and
	// the client's results. It ends the run as Run does.
	Resume func(ctx context.Context, c *ChildRun, req *Request, cont *registry.Continuation) *Envelope
}

// WithFallback returns a copy of e whose resumes go on with runs paused
// in a planner's fallback through fb.Resume.
func (e *Engine) WithFallback(fb *Fallback) *Engine {
	c := *e
	c.fallback = fb
	return &c
}

// RunPromptFallback is RunPrompt with a fallback for a planner that fails;
// a nil fallback is none.
func (e *Engine) RunPromptFallback(ctx context.Context, req *Request, plan PlanFunc, fallback *Fallback) *Envelope {
	r := e.newRun(ctx, req)
	r.fallback = fallback
	return r.run(ctx, plan)
}

func (e *Engine) newRun(ctx context.Context, req *Request) *run {
	ids, _ := toolcontext.IDsFrom(ctx)
	r := &run{
		e:       e,
		req:     req,
		lim:     e.lim.forRequest(req),
		execID:  e.opts.NewID(),
		ids:     ids,
		depth:   toolcontext.Depth(ctx),
		hooks:   e.hooks,
		records: map[*Step]*StepRecord{},
		outputs: map[*Step]any{},
		started: time.Now(),
	}
	// Under a request's budget the run adds its deadline and its tools;
	// the caps are the request's, which the run, its agents and its nested
	// plans share. A run with no request above it is its request's root.
	g := budget.Grant{Deadline: r.started.Add(r.lim.PlanTimeout), Tools: e.allow}
	parent, ok := toolcontext.BudgetFrom(ctx)
	if !ok {
		parent, g = e.mem.node, e.grant(r.lim, r.started)
		g.Root = true
	}
	g.Principal = e.principal
	r.budget = parent.Child(runNodeName(e.source), g)
	r.bytes = runBytes{node: r.budget, mem: e.mem.node}
	r.answer = claimAnswer(ctx)
	r.info = &RunInfo{ExecID: r.execID, IDs: ids, Depth: r.depth, StartedAt: r.started, Source: e.source}
	r.info.Traceparent, _ = toolcontext.TraceparentFrom(ctx)
	r.info.ParentExecID, _ = toolcontext.ExecID(ctx)
	r.info.Goal = req.Prompt
	if req.Plan != nil {
		// Known before validation on the plan path, so that RunStarted
		// can describe the run.
		r.info.Plan, r.info.Leaves = req.Plan, len(req.Plan.Leaves())
	}
	if e.opts.Record != nil {
		r.recordURI = e.opts.Record(r.execID)
	}
	if e.transition != nil {
		r.m = fsm.New(e.transition)
	} else {
		r.m = fsm.New()
	}
	r.fireCtx = context.WithoutCancel(ctx)
	r.ps.elicit, r.ps.askOnPause = e.elicit, e.askOnPause
	tools := e.opts.Tools
	if r.budget.Narrowed() {
		// What the run may call is what its caller could: the tools of
		// the request, the agent or the plan it runs under.
		tools = allowedTools{tools, r.budget.Allows}
	}
	r.ps.tools, r.ps.issues = withClientTools(tools, req.ClientTools)
	return r
}

// runNodeName names a run's budget node for messages: "the run", or the
// agent's run.
func runNodeName(source string) string {
	if name, ok := strings.CutPrefix(source, AgentToolPrefix); ok {
		return "agent " + name
	}
	return "the run"
}

// stepContext returns the context the tool of step s is called with.
func (r *run) stepContext(ctx context.Context, s *Step) context.Context {
	if h := r.e.opts.StepContext; h != nil {
		return h(ctx, r.info, r.record(s))
	}
	return ctx
}

// uuids makes random (version 4) UUIDs from crypto/rand, read 256 ids at a
// time instead of with a system call per id: a run makes one per step.
type uuids struct {
	mu sync.Mutex
	r  *bufio.Reader
}

func newUUIDs() *uuids { return &uuids{r: bufio.NewReaderSize(rand.Reader, 16*256)} }

func (u *uuids) next() string {
	u.mu.Lock()
	id, err := uuid.NewRandomFromReader(u.r)
	u.mu.Unlock()
	if err != nil {
		return uuid.NewString() // crypto/rand does not fail; if it did, NewString panics as it should
	}
	return id.String()
}
