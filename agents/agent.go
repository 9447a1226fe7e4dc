package agents

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	template "github.com/DataDog/datadog-agent/pkg/template/text"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/toolcontext"
	"github.com/orchestra-mcp/orchestra/toolloop"
)

// Source is the catalog source of agent tools.
const Source = "agents"

// Options are what agents need from their host.
type Options struct {
	// Engine runs the agents' tool calls and records their runs.
	Engine *orchestrate.Engine
	// Catalog is where the agents' allowed tools are looked up, at each
	// call: tools that come and go (downstream servers) are seen.
	Catalog *registry.Catalog
	// Model is the model of agents that configure none (the planner's);
	// nil leaves them without one. ModelFor, when set, is asked instead.
	Model llm.Model
	// ModelFor, when set, returns the model of an agent that configures
	// none for the caller in ctx: its tenant's planner model, the
	// planner's, or the client's through MCP sampling. Its error says
	// why there is none.
	ModelFor func(ctx context.Context) (llm.Model, error)
	// NewModel builds an agent's own model; default llm.New.
	NewModel func(cfg llm.Config) (llm.Model, error)
	// Orchestrate, when set, is agent_orchestrate as an agent may call it
	// (only an agent whose tools allow it).
	Orchestrate *registry.Tool
	// Scope, when set, returns what the caller in ctx may use (a tenant's
	// tools and limits): the agent's run is narrowed to it, and a scoped
	// caller's agent never calls agent_orchestrate. ok false leaves the
	// run unscoped.
	Scope func(ctx context.Context) (ro orchestrate.RunOptions, ok bool)
	// Profile, when set, returns what the caller in ctx adds to an
	// agent's run: layers of instructions and a lower max_tool_steps.
	Profile func(ctx context.Context) Profile
	// Prices price the agents' model calls (metadata.cost_usd); a model
	// without a price leaves the cost out.
	Prices llm.Prices
	// Elicit, when set, returns how the user of the caller in ctx is
	// asked (MCP elicitation), or nil when its client cannot be: an agent
	// called directly then asks ask_user through it rather than handing
	// the call to the client. In a plan step the run's own way is used.
	Elicit func(ctx context.Context) orchestrate.Elicit
	// Logger receives the agents' logs; nil discards them.
	Logger *slog.Logger
}

// Profile is what an agent's caller adds to its run.
type Profile struct {
	// Instructions are given to the agent's model after its request, in
	// their order (the operator's, the tenant's, the request's own).
	Instructions orchestrate.Instructions
	// MaxToolSteps, when positive, lowers the agent's max_tool_steps: the
	// lower of the two bounds the loop.
	MaxToolSteps int
}

// Agent is one configured agent.
type Agent struct {
	Name   string
	Config Config
	model  llm.Model          // its own (agents.<name>.model), if any
	data   *jsonschema.Schema // the output_schema, if any
	// version is the hash of the agent's configuration block.
	version string
	opts    Options
	log     *slog.Logger
}

// ToolName returns the catalog name of the agent called name.
func ToolName(name string) string { return orchestrate.AgentToolPrefix + name }

// New builds the agents of a configuration, sorted by name.
func New(cfgs map[string]Config, opts Options) ([]*Agent, error) {
	if opts.NewModel == nil {
		opts.NewModel = func(cfg llm.Config) (llm.Model, error) { return llm.New(cfg, llm.Options{Logger: opts.Logger}) }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var out []*Agent
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(cfgs)) {
		cfg := cfgs[name]
		if p := cfg.Validate(name); len(p) > 0 {
			problems = append(problems, p...)
			continue
		}
		a := &Agent{Name: name, Config: cfg, opts: opts, log: log.With("agent", name), version: ConfigVersion(cfg)}
		if cfg.Model != nil {
			m, err := opts.NewModel(*cfg.Model)
			if err != nil {
				problems = append(problems, fmt.Sprintf("agent %s: its model (agents.%s.model) cannot be used: %v; fix agents.%s.model, or remove it to give the agent the planner's model", name, name, err, name))
				continue
			}
			a.model = m
		}
		if cfg.OutputSchema != nil {
			a.data, _ = schemaOf("agents."+name+".output_schema", cfg.OutputSchema)
		}
		out = append(out, a)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// Tools builds the agents of a configuration as catalog tools.
func Tools(cfgs map[string]Config, opts Options) ([]registry.Tool, error) {
	as, err := New(cfgs, opts)
	if err != nil {
		return nil, err
	}
	tools := make([]registry.Tool, len(as))
	for i, a := range as {
		tools[i] = a.Tool()
	}
	return tools, nil
}

// ModelName names the agent's model: its own, else the planner's, or ""
// when neither is configured (it then asks for the caller's model at each
// call).
func (a *Agent) ModelName() string {
	switch {
	case a.model != nil:
		return a.model.Name()
	case a.opts.Model != nil:
		return a.opts.Model.Name()
	}
	return ""
}

// modelFor returns the model of a call from the caller in ctx: the
// agent's own, else what Options.ModelFor finds, else Options.Model.
func (a *Agent) modelFor(ctx context.Context) (llm.Model, error) {
	switch {
	case a.model != nil:
		return a.model, nil
	case a.opts.ModelFor != nil:
		return a.opts.ModelFor(ctx)
	case a.opts.Model != nil:
		return a.opts.Model, nil
	}
	return nil, errors.New("no planner model is configured")
}

// Tool returns the agent as a catalog tool.
func (a *Agent) Tool() registry.Tool {
	desc := strings.TrimSpace(a.Config.Description)
	if len(a.Config.Actions) > 0 {
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(a.Config.Actions)) {
			parts = append(parts, n+" ("+firstSentence(a.Config.Actions[n].Description)+")")
		}
		desc += " Actions: " + strings.Join(parts, "; ") + "."
	}
	desc += " An agent: send user_query (and with); the answer is in result.text"
	if a.data != nil {
		desc += " and result.data"
	}
	desc += "; status partial means an incomplete answer (error says what is missing)."
	return registry.Tool{
		Name:         ToolName(a.Name),
		Title:        "Agent " + a.Name,
		Description:  desc,
		InputSchema:  inputSchema(slices.Collect(maps.Keys(a.Config.Actions))),
		OutputSchema: outputSchema(a.data),
		Annotations:  &mcp.ToolAnnotations{Title: "Agent " + a.Name, OpenWorldHint: new(true)},
		Source:       Source,
		Call:         a.call,
	}
}

func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, ".\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// allows reports whether the agent's tools globs allow the tool name.
func (a *Agent) allows(name string) bool { return allows(a.Config.Tools, name) }

// AllowedTools returns the catalog tools the agent may call now, sorted.
func (a *Agent) AllowedTools() []registry.Tool { return a.allowedTools(nil) }

// allowedTools is AllowedTools within scope, when scope is set: only the
// tools it allows, and never agent_orchestrate.
func (a *Agent) allowedTools(scope func(string) bool) []registry.Tool {
	var out []registry.Tool
	for _, t := range a.opts.Catalog.List() {
		if t.Name != orchestrate.ToolName && allows(a.Config.Tools, t.Name) && (scope == nil || scope(t.Name)) {
			out = append(out, t)
		}
	}
	if o := a.opts.Orchestrate; o != nil && scope == nil && allows(a.Config.Tools, orchestrate.ToolName) {
		out = append(out, *o)
		slices.SortFunc(out, func(x, y registry.Tool) int { return strings.Compare(x.Name, y.Name) })
	}
	return out
}

// maxToolResultBytes caps a tool result sent back to the model.
const maxToolResultBytes = 32 << 10

// call runs the agent for one request. It never panics into the caller's
// plan: whatever fails is a response with status error, except a caller
// that stopped waiting, whose step is cancelled.
func (a *Agent) call(ctx context.Context, cr *registry.CallRequest) (*registry.Result, error) {
	start := time.Now()
	req, reqErr := decodeRequest(cr.Arguments)
	if reqErr != nil {
		req = &ExecutionRequest{}
	} else {
		reqErr = a.checkSelected(req)
	}
	// The request has an id: its caller's request's, else the one it
	// sends, else a new one. The agent's tool calls carry it.
	ids, _ := toolcontext.IDsFrom(ctx)
	if ids.RequestID == "" {
		ids.RequestID = req.RequestID
		if ids.RequestID == "" {
			ids.RequestID = uuid.NewString()
		}
		ctx = toolcontext.WithIDs(ctx, ids)
	}
	meta := Metadata{Agent: a.Name, Model: a.ModelName(), RoutingMode: routingMode(ctx, req), Tools: []string{}, ConfigVersion: a.version}
	requestID := cmp.Or(req.RequestID, ids.RequestID)
	engine, scope := a.opts.Engine, func(string) bool { return true }
	scoped := false
	if a.opts.Scope != nil {
		if ro, ok := a.opts.Scope(ctx); ok {
			engine, scoped = engine.With(ro), true
			if ro.AllowTool != nil {
				scope = ro.AllowTool
			}
		}
	}
	// The agent's run is a node of its caller's budget: what it spends
	// counts against its request's, and it and what runs under it (a
	// nested plan) may call only the tools it allows and its caller could.
	engine = engine.With(orchestrate.RunOptions{AllowTool: a.allows})
	// A resume of the run that called the agent takes up its paused loop,
	// under the same child run.
	var cont *loopState
	if c := cr.Continue; c != nil {
		cont = &loopState{}
		if err := json.Unmarshal(c.State, cont); err != nil || cont.ExecID == "" {
			resp := &ExecutionResponse{RequestID: requestID, Status: StatusError, Metadata: meta,
				Error: &ResponseError{Code: orchestrate.CodeInvalidInput, Message: fmt.Sprintf("agent %s cannot go on: the state of its paused loop does not decode; start the run again", a.Name)}}
			return result(resp), nil
		}
	}
	var child *orchestrate.ChildRun
	var cctx context.Context
	var err error
	if cont != nil {
		child, cctx, err = engine.ContinueChild(ctx, ToolName(a.Name), cont.ExecID, cont.Steps, cont.Calls)
	} else {
		child, cctx, err = engine.StartChild(ctx, ToolName(a.Name))
	}
	if err != nil {
		resp := &ExecutionResponse{RequestID: requestID, Status: StatusError, Metadata: meta,
			Error: &ResponseError{Code: orchestrate.CodeLimitExceeded, Message: fmt.Sprintf("agent %s did not start: %v", a.Name, err)}}
		return result(resp), nil
	}
	meta.ExecID = child.ExecID()
	resp := &ExecutionResponse{RequestID: requestID, Status: StatusSuccess, Metadata: meta}
	if cont != nil {
		m := cont.Metadata
		resp.Metadata.ModelCalls, resp.Metadata.ToolCalls, resp.Metadata.TokensIn, resp.Metadata.TokensOut = m.ModelCalls, m.ToolCalls, m.TokensIn, m.TokensOut
		if m.Tools != nil {
			resp.Metadata.Tools = m.Tools
		}
		start = start.Add(-time.Duration(m.DurationMS) * time.Millisecond)
	}
	var loopErr *orchestrate.Error
	var handoff *registry.Handoff
	if reqErr == nil {
		var only func(string) bool
		if scoped {
			only = scope
		}
		var results map[string]any
		if cont != nil {
			results = cr.Continue.Results
		}
		handoff = a.safeRun(cctx, child, req, resp, only, cr.Progress, cont, results)
	} else {
		resp.Status, resp.Error = StatusError, &ResponseError{Code: orchestrate.CodeInvalidInput, Message: reqErr.Error()}
	}
	if handoff != nil && ctx.Err() == nil {
		if r, ok := a.pause(ctx, child, cr, resp, handoff, start); ok {
			return r, nil
		}
	}
	resp.Metadata.DurationMS = time.Since(start).Milliseconds()
	status := orchestrate.StatusSuccess
	switch resp.Status {
	case StatusError:
		status = orchestrate.StatusFailed
		loopErr = &orchestrate.Error{Code: resp.Error.Code, Message: resp.Error.Message}
	case StatusPartial:
		status = orchestrate.StatusPartial
		loopErr = &orchestrate.Error{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The caller stopped waiting (a first_success race was won by
		// another step, the client cancelled): the step is cancelled, not
		// failed.
		child.Finish(orchestrate.StatusFailed, resp.Result.Text, &orchestrate.Error{Code: orchestrate.CodeCancelled, Message: "agent " + a.Name + ": cancelled by its caller"})
		return nil, ctx.Err()
	}
	child.Finish(status, resp.Result.Text, loopErr)
	return result(resp), nil
}

// checkSelected refuses a request whose selected_agent names another
// agent than a.
func (a *Agent) checkSelected(req *ExecutionRequest) error {
	if req.SelectedAgent == "" || req.SelectedAgent == a.Name {
		return nil
	}
	fix := fmt.Sprintf("there is no agent %q", req.SelectedAgent)
	if _, ok := a.opts.Catalog.Lookup(ToolName(req.SelectedAgent)); ok {
		fix = "call " + ToolName(req.SelectedAgent) + " for it"
	}
	return fmt.Errorf("selected_agent is %q, but this is agent %s (%s): send selected_agent %q, or leave it out; %s",
		req.SelectedAgent, a.Name, ToolName(a.Name), a.Name, fix)
}

// routingMode is who chose the agent of a call: auto when a model
// orchestra runs did (its planner, its fallback, another agent), else
// what the request says, manual by default.
func routingMode(ctx context.Context, req *ExecutionRequest) string {
	if c, ok := toolcontext.CallFrom(ctx); ok && c.Auto {
		return RoutingAuto
	}
	return cmp.Or(req.RoutingMode, RoutingManual)
}

// safeRun runs the loop; a panic in it is the response's error, and the
// child run still finishes.
func (a *Agent) safeRun(ctx context.Context, child *orchestrate.ChildRun, req *ExecutionRequest, resp *ExecutionResponse, scope func(string) bool, progress func(registry.Progress), cont *loopState, results map[string]any) (h *registry.Handoff) {
	defer func() {
		if v := recover(); v != nil {
			a.log.Error("agent panicked", "exec_id", child.ExecID(), "panic", v, "stack", string(debug.Stack()))
			resp.Status, resp.Error = StatusError, &ResponseError{Code: orchestrate.CodePanic, Message: fmt.Sprint("internal error: ", v)}
			h = nil
		}
	}()
	return a.run(ctx, child, req, resp, scope, progress, cont, results)
}

// pause ends a call whose loop handed calls to the client: the run that
// called the agent pauses (the result carries the handoff), or, called
// directly, the agent's own run pauses and answers awaiting_client with
// the pending calls and how to resume. ok false means it cannot pause
// (it runs inside another loop), and resp says why.
func (a *Agent) pause(ctx context.Context, child *orchestrate.ChildRun, cr *registry.CallRequest, resp *ExecutionResponse, h *registry.Handoff, start time.Time) (*registry.Result, bool) {
	waits := fmt.Sprintf("agent %s waits for the client to run %s", a.Name, strings.Join(h.Tools(), ", "))
	if _, ok := orchestrate.ClientSideFrom(ctx); ok {
		resp.Metadata.DurationMS = time.Since(start).Milliseconds()
		resp.Result.Text = waits
		r := result(resp)
		r.Handoff = h
		return r, true
	}
	if _, inRun := toolcontext.ExecID(ctx); inRun {
		resp.Status, resp.Error = StatusError, &ResponseError{Code: orchestrate.CodeClientInLoop,
			Message: fmt.Sprintf("agent %s asked for %s, which the client runs, and it runs inside a tool loop that cannot pause for the client; call agent %s from a plan step (agent_orchestrate) or directly", a.Name, strings.Join(h.Tools(), ", "), a.Name)}
		return nil, false
	}
	pending, hint, err := child.Pause(ctx, ToolName(a.Name), cr.Arguments, h)
	if err != nil {
		resp.Status, resp.Error = StatusError, &ResponseError{Code: orchestrate.CodePauseExpired, Message: fmt.Sprintf("%s, and the pause could not be kept: %v", waits, err)}
		return nil, false
	}
	resp.Status, resp.Pending, resp.Resume = StatusAwaitingClient, pending, hint
	resp.Metadata.DurationMS = time.Since(start).Milliseconds()
	resp.Result.Text = waits + "; " + hint.How
	return result(resp), true
}

// result turns a response into the tool's result.
func result(resp *ExecutionResponse) *registry.Result {
	text := resp.Result.Text
	switch {
	case resp.Status == StatusPartial:
		// The why first: a plan's step error is the first paragraph.
		text = resp.Error.Message + "\n\n" + resp.Result.Text
	case resp.Error != nil:
		text = fmt.Sprintf("agent %s failed (%s): %s", resp.Metadata.Agent, resp.Error.Code, resp.Error.Message)
	}
	// The structured content goes out as a plain JSON value, as a
	// downstream tool's would.
	var structured any
	data, _ := json.Marshal(resp)
	_ = json.Unmarshal(data, &structured)
	r := &registry.Result{Structured: structured, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	switch resp.Status {
	case StatusError:
		r.IsError, r.Code = true, string(resp.Error.Code)
	case StatusPartial:
		r.Partial, r.Code = true, string(resp.Error.Code)
	}
	return r
}

// run runs the agent's loop for req and fills resp; with cont it goes on
// with the paused loop, the client's results in results. A loop that
// hands calls to the client returns the handoff, and resp is not final.
func (a *Agent) run(ctx context.Context, child *orchestrate.ChildRun, req *ExecutionRequest, resp *ExecutionResponse, scope func(string) bool, progress func(registry.Progress), cont *loopState, results map[string]any) *registry.Handoff {
	fail := func(code orchestrate.Code, msg string) {
		resp.Status, resp.Error = StatusError, &ResponseError{Code: code, Message: msg}
	}
	model, err := a.modelFor(ctx)
	if err != nil {
		fail(orchestrate.CodeModelError, fmt.Sprintf("agent %s has no model: %v; set agents.%s.model, or configure a planner model (the planner block, or the tenant's)", a.Name, err, a.Name))
		return nil
	}
	resp.Metadata.Model = model.Name()
	var profile Profile
	if a.opts.Profile != nil {
		profile = a.opts.Profile(ctx)
	}
	user, err := a.userMessage(req, profile.Instructions)
	if err != nil {
		fail(orchestrate.CodeInvalidInput, err.Error())
		return nil
	}
	// The conversation of the prompt that started the plan, if it named one.
	if history, tokens := orchestrate.ConversationFrom(ctx); len(history) > 0 {
		user = orchestrate.ConversationText(history, tokens*4, tokens) + "\n\n" + user
	}
	allowed := a.allowedTools(scope)
	side, inRun := a.clientSide(ctx)
	if inRun {
		// The client tools of the run that called the agent, as its
		// tools allow.
		for _, t := range side.Tools {
			if a.allows(t.Name) && (scope == nil || scope(t.Name)) && !slices.ContainsFunc(allowed, func(x registry.Tool) bool { return x.Name == t.Name }) {
				allowed = append(allowed, t)
			}
		}
	}
	byName := map[string]registry.Tool{}
	defs := make([]llm.ToolDef, 0, len(allowed))
	for _, t := range allowed {
		byName[t.Name] = t
		defs = append(defs, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: toolloop.Parameters(t.InputSchema)})
	}
	names := slices.Collect(maps.Keys(byName))
	slices.Sort(names)
	system := strings.TrimSpace(a.Config.Instructions)
	if system == "" {
		system = "You are the agent " + a.Name + ": " + a.Config.Description
	}
	if a.data != nil {
		schema, _ := json.Marshal(a.Config.OutputSchema)
		system += "\n\nYour final answer is only a JSON value matching this JSON Schema, with no other text:\n" + string(schema)
	}
	maxSteps := a.Config.MaxToolSteps
	if maxSteps == 0 {
		maxSteps = DefaultMaxToolSteps
	}
	if n := profile.MaxToolSteps; n > 0 {
		maxSteps = min(maxSteps, n)
	}
	var calls int
	tl := &tally{}
	loop := &toolloop.Loop{
		Generate: func(ctx context.Context, r *llm.Request) (*llm.Response, error) {
			return a.generate(ctx, model, child, resp, r)
		},
		System:   system,
		Tools:    defs,
		MaxTurns: maxSteps,
		MaxCalls: a.opts.Engine.Limits().MaxSteps,
		Call: func(ctx context.Context, tc llm.ToolCall) string {
			calls++
			resp.Metadata.ToolCalls++
			if !slices.Contains(resp.Metadata.Tools, tc.Name) {
				resp.Metadata.Tools = append(resp.Metadata.Tools, tc.Name)
			}
			if progress != nil {
				progress(registry.Progress{Progress: float64(calls), Message: fmt.Sprintf("agent %s: calling %s", a.Name, tc.Name)})
			}
			if tc.Name == orchestrate.AskUserTool && side.Elicit != nil {
				if _, ok := byName[tc.Name]; ok {
					return a.askUser(ctx, child, side.Elicit, tc)
				}
			}
			return a.callTool(ctx, child, byName, names, tc, tl)
		},
	}
	loop.Handoff = toolloop.ClientHandoff(child, byName, side.HandsOff) // ask_user only when it cannot be elicited
	var out *toolloop.Result
	if cont != nil {
		if cont.RemainingMS > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(cont.RemainingMS)*time.Millisecond)
			defer cancel()
		}
		var err error
		if out, err = loop.Resume(ctx, &cont.Loop, toolloop.ClientResults(child, &cont.Loop, results, maxToolResultBytes)); err != nil {
			fail(orchestrate.CodeInvalidInput, fmt.Sprintf("agent %s: %v", a.Name, err))
			return nil
		}
	} else {
		out = loop.Run(ctx, []llm.Message{{Role: llm.RoleUser, Content: user}})
	}
	if out.Paused != nil {
		h, err := a.handoff(ctx, child, resp, out.Paused)
		if err != nil {
			fail(orchestrate.CodeModelError, err.Error())
			return nil
		}
		return h
	}
	if e := out.Err; e != nil {
		code := e.Code
		if code == orchestrate.CodeModelError && ctx.Err() == context.DeadlineExceeded {
			code = orchestrate.CodeTimeout
		}
		fail(code, fmt.Sprintf("agent %s: %s", a.Name, e.Message))
		if (code == orchestrate.CodeMaxToolSteps || code == orchestrate.CodeTimeout || code == orchestrate.CodeLimitExceeded) && tl.hasResults() {
			// Stopped after useful tool results: what they returned is
			// the answer it has.
			resp.Status, resp.Result.Text = StatusPartial, tl.summary(a.Name, code)
		}
		return nil
	}
	resp.Result.Text = out.Answer
	defer tl.settle(a.Name, resp)
	if a.data == nil {
		return nil
	}
	data, verr := a.parseOutput(out.Answer)
	if verr != nil {
		// One repair: the model sees what is wrong with its answer.
		msgs := append(slices.Clone(out.Messages), llm.Message{Role: llm.RoleAssistant, Content: out.Answer},
			llm.Message{Role: llm.RoleUser, Content: "Your answer is not valid: " + verr.Error() + ". Answer again with only the JSON value matching the schema."})
		r := &llm.Request{System: system, Messages: msgs, ResponseSchema: a.Config.OutputSchema}
		again, err := a.generate(ctx, model, child, resp, r)
		if err != nil {
			code := orchestrate.CodeModelError
			if ex := (*budget.Exceeded)(nil); errors.As(err, &ex) {
				code = orchestrate.CodeLimitExceeded
			}
			fail(code, fmt.Sprintf("agent %s: repairing its answer: %v", a.Name, err))
			return nil
		}
		resp.Result.Text = strings.TrimSpace(again.Text)
		if data, verr = a.parseOutput(again.Text); verr != nil {
			fail(orchestrate.CodeInvalidOutput, fmt.Sprintf("agent %s: its answer does not match its output_schema, even after a repair: %v", a.Name, verr))
			return nil
		}
	}
	resp.Result.Data = data
	return nil
}

// generate makes one model call of the agent and records it as a step.
// With an output_schema every call asks for it: the model may call tools
// or answer, and its answer is JSON matching the schema.
func (a *Agent) generate(ctx context.Context, model llm.Model, child *orchestrate.ChildRun, resp *ExecutionResponse, r *llm.Request) (*llm.Response, error) {
	if a.data != nil {
		r.ResponseSchema = a.Config.OutputSchema
	}
	// Every model call draws from the request's budget, however deeply
	// the agent runs.
	b, _ := toolcontext.BudgetFrom(ctx)
	if err := b.Spend(budget.ModelCalls, 1); err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := model.Generate(ctx, r)
	resp.Metadata.ModelCalls++
	rec := &orchestrate.StepRecord{Type: "model", Tool: model.Name(), Status: orchestrate.StatusSuccess, Attempts: 1, StartedAt: &start, DurationMS: time.Since(start).Milliseconds()}
	if err != nil {
		rec.Status, rec.Error = orchestrate.StatusFailed, &orchestrate.Error{Code: orchestrate.CodeModelError, Message: err.Error()}
	} else {
		resp.Metadata.TokensIn += out.Usage.InputTokens
		resp.Metadata.TokensOut += out.Usage.OutputTokens
		cost, priced := a.opts.Prices.Cost(out.Usage, model.Name(), out.Model)
		resp.Metadata.price(cost, priced)
		if out.Model != "" {
			resp.Metadata.Model = out.Model
		}
		calls := []string{}
		for _, tc := range out.ToolCalls {
			calls = append(calls, tc.Name)
		}
		rec.Output = map[string]any{"text": out.Text, "tool_calls": calls, "tokens_in": out.Usage.InputTokens, "tokens_out": out.Usage.OutputTokens}
		if priced {
			rec.Output.(map[string]any)["cost_usd"] = cost
		}
	}
	child.Step("model", rec)
	return out, err
}

// callTool runs one tool call of the model, only if the agent may make it,
// and returns what the model is told.
func (a *Agent) callTool(ctx context.Context, child *orchestrate.ChildRun, byName map[string]registry.Tool, names []string, tc llm.ToolCall, tl *tally) string {
	refuse := func(code orchestrate.Code, msg string) string {
		now := time.Now()
		child.Step("refused", &orchestrate.StepRecord{Type: "tool", Tool: tc.Name, Status: orchestrate.StatusFailed, StartedAt: &now,
			Error: &orchestrate.Error{Code: code, Message: msg}})
		return "error: " + msg
	}
	t, ok := byName[tc.Name]
	if !ok {
		has := "it has no tools"
		if len(names) > 0 {
			has = "its tools are " + strings.Join(names, ", ")
		}
		return refuse(orchestrate.CodeForbiddenTool, fmt.Sprintf("tool %q is not allowed for agent %s; %s", tc.Name, a.Name, has))
	}
	var args map[string]any
	if err := llm.DecodeArguments(tc.Arguments, &args); err != nil || args == nil {
		if len(bytes.TrimSpace(tc.Arguments)) != 0 {
			tl.failed(tc.Name, &orchestrate.Error{Code: orchestrate.CodeInvalidArguments, Message: "its arguments are not a JSON object"})
			return refuse(orchestrate.CodeInvalidArguments, fmt.Sprintf("the arguments of %s are not a JSON object", tc.Name))
		}
		args = map[string]any{}
	}
	var rec *orchestrate.StepRecord
	if t.Name == orchestrate.ToolName {
		rec = a.orchestrate(ctx, child, t, args)
	} else {
		rec = child.Call(ctx, t.Name, args)
	}
	if rec.Status == orchestrate.StatusPartial {
		// A partial answer (another agent's) is an answer, and a gap.
		out, _ := json.Marshal(rec.Output)
		text := textcut.Truncate(string(out), maxToolResultBytes)
		tl.succeeded(t.Name, text)
		tl.failed(t.Name, rec.Error)
		return text
	}
	if rec.Error != nil {
		tl.failed(t.Name, rec.Error)
		if rec.Error.Code == orchestrate.CodeValidation {
			return "error: " + rec.Error.Message
		}
		return "error: " + string(rec.Error.Code) + ": " + rec.Error.Message
	}
	out, err := json.Marshal(rec.Output)
	if err != nil {
		tl.succeeded(t.Name, "(the output could not be encoded)")
		return "(the output could not be encoded)"
	}
	text := textcut.Truncate(string(out), maxToolResultBytes)
	tl.succeeded(t.Name, text)
	return text
}

// orchestrate runs agent_orchestrate for the agent, at the agent's depth:
// the limit on nested orchestrations applies.
func (a *Agent) orchestrate(ctx context.Context, child *orchestrate.ChildRun, t registry.Tool, args map[string]any) *orchestrate.StepRecord {
	start := time.Now()
	rec := &orchestrate.StepRecord{Type: "tool", Tool: t.Name, Arguments: args, Attempts: 1, StartedAt: &start, Status: orchestrate.StatusSuccess}
	res, err := t.Invoke(ctx, &registry.CallRequest{Arguments: args})
	rec.DurationMS = time.Since(start).Milliseconds()
	switch {
	case err != nil:
		rec.Status, rec.Error = orchestrate.StatusFailed, &orchestrate.Error{Code: orchestrate.CodeToolError, Message: err.Error()}
	case res.IsError:
		rec.Output = res.Output()
		rec.Status, rec.Error = orchestrate.StatusFailed, &orchestrate.Error{Code: orchestrate.CodeToolError, Message: res.Text()}
		if code := envelopeCode(res.Structured); code != "" {
			rec.Error.Code = orchestrate.Code(code)
		}
	default:
		rec.Output = res.Output()
	}
	child.Step("orchestrate", rec)
	return rec
}

// envelopeCode returns the code of the first error of an orchestration
// envelope, if structured is one.
func envelopeCode(structured any) string {
	data, err := json.Marshal(structured)
	if err != nil {
		return ""
	}
	var env struct {
		Artifact struct {
			Errors []struct {
				Code string `json:"code"`
			} `json:"errors"`
		} `json:"artifact"`
	}
	if json.Unmarshal(data, &env) != nil || len(env.Artifact.Errors) == 0 {
		return ""
	}
	return env.Artifact.Errors[0].Code
}

// userMessage is the request as the model reads it.
func (a *Agent) userMessage(req *ExecutionRequest, in orchestrate.Instructions) (string, error) {
	var b strings.Builder
	if req.Action != "" {
		act, ok := a.Config.Actions[req.Action]
		if !ok {
			names := slices.Sorted(maps.Keys(a.Config.Actions))
			return "", fmt.Errorf("agent %s has no action %q; its actions are %v", a.Name, req.Action, names)
		}
		params := req.ParsedParameters
		if params == nil {
			params = map[string]any{}
		}
		if act.InputSchema != nil {
			if s, err := schemaOf("agents."+a.Name+".actions."+req.Action+".input_schema", act.InputSchema); err == nil {
				if err := schemas.ValidateValue(s, params); err != nil {
					return "", fmt.Errorf("the parameters of action %s: %s", req.Action, schemas.CleanError(err))
				}
			}
		}
		tmpl, err := template.New(req.Action).Option("missingkey=zero").Parse(act.Prompt)
		if err != nil {
			return "", fmt.Errorf("action %s: %w", req.Action, err)
		}
		if err := tmpl.Execute(&b, params); err != nil {
			return "", fmt.Errorf("action %s: %w", req.Action, err)
		}
		b.WriteString("\n\n")
	}
	if q := strings.TrimSpace(req.UserQuery); q != "" {
		b.WriteString(q)
		b.WriteString("\n\n")
	}
	if req.Action == "" && len(req.ParsedParameters) > 0 {
		p, _ := json.Marshal(req.ParsedParameters)
		b.WriteString("Parameters: " + string(p) + "\n\n")
	}
	if len(req.SessionContext) > 0 {
		p, _ := json.Marshal(req.SessionContext)
		b.WriteString("Session context: " + string(p) + "\n\n")
	}
	if s := in.Render(); s != "" {
		b.WriteString(s + "\n\n")
	}
	if s := strings.TrimSpace(req.AgentInstructions); s != "" {
		b.WriteString("Instructions for this request: " + s + "\n\n")
	}
	msg := strings.TrimSpace(b.String())
	if msg == "" {
		return "", errors.New("the request is empty: send user_query (or an action)")
	}
	return msg, nil
}

// parseOutput reads the model's answer as JSON matching the output schema.
func (a *Agent) parseOutput(text string) (any, error) {
	text = strings.TrimSpace(text)
	if s, ok := strings.CutPrefix(text, "```"); ok {
		s = strings.TrimPrefix(s, "json")
		text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	}
	var v any
	if err := llm.DecodeArguments([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("it is not JSON (%v)", err)
	}
	if err := schemas.ValidateValue(a.data, v); err != nil {
		return nil, errors.New(schemas.CleanError(err))
	}
	return v, nil
}
