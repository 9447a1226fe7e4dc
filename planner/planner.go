package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/internal/plural"
	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Defaults of [Options].
const (
	// DefaultAttempts is how many answers the planner asks for: the first
	// and one repair with the errors fed back.
	DefaultAttempts = 2
	// DefaultMaxToolSteps bounds the model turns of the reactive fallback.
	DefaultMaxToolSteps = 10
)

// maxLastAnswer caps the model's last answer kept in the response.
const maxLastAnswer = 16 << 10

// Options configure a [Planner].
type Options struct {
	// Catalog is where the tools come from.
	Catalog Catalog
	// Engine validates and runs plans; it must use the same catalog.
	Engine *orchestrate.Engine
	// Model answers; it may also be given later with [Planner.WithModel].
	Model llm.Model
	// Forbidden reports tools a plan may not call (besides
	// agent_orchestrate, which is never offered).
	Forbidden func(name string) bool
	// Attempts is how many answers to ask for before giving up; default 2.
	Attempts int
	// MaxToolSteps bounds the model turns of the reactive fallback;
	// default 10.
	MaxToolSteps int
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger

	// Fallback is the fallback of requests that set none: FallbackReactive
	// runs the reactive loop whenever no valid plan can be made.
	Fallback string
	// ContextTokens caps the caller's context given to the model;
	// default DefaultContextTokens.
	ContextTokens int
	// Lessons keeps what past runs taught; nil keeps nothing.
	Lessons Lessons
	// Insights is how many lessons the planner is shown; 0 means
	// DefaultInsights, a negative number none.
	Insights int
	// Reflection asks the model for a one-sentence lesson after a failed
	// run (one more model call).
	Reflection bool
	// Stream is the policy of streamed planning with models that stream:
	// orchestrate.StreamReadOnly (the default, ""), StreamOff or StreamAll;
	// see orchestrate.Stream.
	Stream string
}

// Planner turns goals into validated plans with one model call, runs them,
// and writes answers from their results.
type Planner struct {
	opts  Options
	log   *slog.Logger
	cache *toolCache
}

type toolCache struct {
	mu   sync.Mutex
	tool *Tool
}

// New returns a planner.
func New(opts Options) *Planner {
	if opts.Attempts <= 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.MaxToolSteps <= 0 {
		opts.MaxToolSteps = DefaultMaxToolSteps
	}
	if opts.Engine == nil {
		opts.Engine = orchestrate.NewEngine(orchestrate.Options{})
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Planner{opts: opts, log: log, cache: &toolCache{}}
}

// WithModel returns a planner that asks m, sharing p's generated tool.
func (p *Planner) WithModel(m llm.Model) *Planner {
	q := *p
	q.opts.Model = m
	return &q
}

// WithEngine returns a planner that runs plans with e, sharing p's
// generated tool: e is usually p's engine with the options of one request
// (orchestrate.Engine.With).
func (p *Planner) WithEngine(e *orchestrate.Engine) *Planner {
	q := *p
	q.opts.Engine = e
	return &q
}

// Model returns the planner's model, or nil.
func (p *Planner) Model() llm.Model { return p.opts.Model }

// Tool returns the planning tool for the catalog's current version,
// generating it again when the catalog changed.
func (p *Planner) Tool() *Tool {
	var version uint64
	if p.opts.Catalog != nil {
		version = p.opts.Catalog.Version()
	}
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	if t := p.cache.tool; t != nil && t.Version == version && p.opts.Catalog != nil {
		return t
	}
	var t *Tool
	if p.opts.Catalog == nil {
		t = Build(0, nil, BuildOptions{Forbidden: p.opts.Forbidden, MaxSteps: p.opts.Engine.Limits().MaxSteps})
	} else {
		t = Build(version, p.opts.Catalog.List(), BuildOptions{Forbidden: p.opts.Forbidden, MaxSteps: p.opts.Engine.Limits().MaxSteps})
	}
	p.cache.tool = t
	if len(t.StrictProblems) > 0 {
		p.log.Debug("planning tool is not strict", "catalog_version", version, "problems", t.StrictProblems)
	}
	return t
}

// narrowedTo returns p, or, when the budget ctx carries allows fewer tools
// than p's planning tool offers (the request runs for an agent whose
// tools are few), a planner offering only what it allows: a nested
// plan can call only what its caller could, and the model is not offered
// the rest.
func (p *Planner) narrowedTo(ctx context.Context) *Planner {
	b, _ := toolcontext.BudgetFrom(ctx)
	if !b.Narrowed() || !slices.ContainsFunc(p.Tool().Tools, func(n string) bool { return !b.Allows(n) }) {
		return p
	}
	q := *p
	forbidden := p.opts.Forbidden
	q.opts.Forbidden = func(n string) bool { return !b.Allows(n) || (forbidden != nil && forbidden(n)) }
	q.cache = &toolCache{}
	return &q
}

// Result is what planning produced.
type Result struct {
	// Plan is the validated plan; after a failure, the last plan the
	// model wrote that could be decoded, if any.
	Plan *orchestrate.Plan
	// Info records the model calls.
	Info *orchestrate.PlannerInfo
	// Issues are the problems of the model's last answer when planning
	// gave up.
	Issues []*orchestrate.Issue
}

// ErrGaveUp reports that the model's answers were still invalid after the
// last attempt.
var ErrGaveUp = errors.New("the planner gave up")

// ErrRecursion reports planning asked for while planning.
var ErrRecursion = errors.New("planning is disabled here: a tool called while planning may not plan again")

// ErrNoModel reports a planner without a model.
var ErrNoModel = errors.New("no planner model")

// Plan asks the model for a plan for req.Prompt with one call of the
// planning tool, and validates it exactly like a structured plan (the
// request's bindings and limits). An invalid answer is sent back with its
// errors, up to the configured attempts; then Plan fails with [ErrGaveUp]
// and the last answer and its errors in the result. The result is never
// nil. Planning runs with planner tools disabled in the context and within
// the plan's deadline; a deadline that passes is a timeout.
func (p *Planner) Plan(ctx context.Context, req *orchestrate.Request) (*Result, error) {
	res := &Result{Info: &orchestrate.PlannerInfo{}}
	if p.opts.Model == nil {
		return res, ErrNoModel
	}
	res.Info.Model = p.opts.Model.Name()
	if toolcontext.PlannerDisabled(ctx) {
		return res, ErrRecursion
	}
	ctx = toolcontext.WithPlannerDisabled(ctx)
	ctx, cancel := context.WithTimeout(ctx, p.planTimeout(ctx, req))
	defer cancel()

	offer := p.narrowedTo(ctx)
	tool := offer.withClientTools(req, offer.toolFor(req.Prompt))
	def := tool.Def()
	msgs := []llm.Message{{Role: llm.RoleUser, Content: p.planningMessage(ctx, tool, req)}}
	var rejected *orchestrate.Plan // the last plan the model had to repair
	var rejectedIssues []*orchestrate.Issue
	for attempt := 1; attempt <= p.opts.Attempts; attempt++ {
		res.Info.Attempts = attempt
		resp, err := p.generatePlan(ctx, res.Info, &llm.Request{System: tool.Prompt, Messages: msgs, Tools: []llm.ToolDef{def}, ToolChoice: ToolName}, tool)
		if err != nil && def.Strict && errors.Is(err, llm.ErrBadRequest) {
			// The provider did not take the strict schema: ask again without it.
			p.log.DebugContext(ctx, "strict planning schema rejected; retrying without strict", "error", err)
			def = tool.LooseDef()
			resp, err = p.generatePlan(ctx, res.Info, &llm.Request{System: tool.Prompt, Messages: msgs, Tools: []llm.ToolDef{def}, ToolChoice: ToolName}, tool)
		}
		if err != nil {
			return res, timeoutError(ctx, err)
		}
		answer, call := planningAnswer(resp)
		res.Info.LastAnswer = textcut.Truncate(answer, maxLastAnswer)
		plan, issues := p.decode(tool, call, resp.Text)
		if plan != nil {
			res.Plan = plan
			if len(issues) == 0 {
				v := p.opts.Engine.Validate(&orchestrate.Request{Plan: plan, Bindings: req.Bindings, TimeoutMS: req.TimeoutMS, MaxParallel: req.MaxParallel, ClientTools: req.ClientTools})
				issues = v.Errors
			}
		}
		if len(issues) == 0 {
			res.Info.LastAnswer, res.Issues = "", nil
			if rejectedIssues != nil {
				p.learn(ctx, repairLessons(rejected, plan, rejectedIssues))
			}
			return res, nil
		}
		res.Issues = issues
		rejected, rejectedIssues = plan, issues
		if st, ok := orchestrate.StreamFrom(ctx); ok {
			st.Reject("the plan failed validation")
		}
		p.log.DebugContext(ctx, "plan rejected", "attempt", attempt, "issues", len(issues))
		if attempt == p.opts.Attempts {
			break
		}
		feedback := repairMessage(attempt, p.opts.Attempts, issues)
		if call != nil {
			msgs = append(msgs,
				llm.Message{Role: llm.RoleAssistant, Content: resp.Text, ToolCalls: []llm.ToolCall{*call}},
				llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: feedback})
		} else {
			msgs = append(msgs,
				llm.Message{Role: llm.RoleAssistant, Content: resp.Text},
				llm.Message{Role: llm.RoleUser, Content: feedback})
		}
	}
	return res, fmt.Errorf("%w after %d attempts: the model's last plan has %s (see validation_errors and planner.last_answer)", ErrGaveUp, res.Info.Attempts, plural.Count(len(res.Issues), "problem"))
}

// generate makes one model call and records it.
func (p *Planner) generate(ctx context.Context, info *orchestrate.PlannerInfo, req *llm.Request) (*llm.Response, error) {
	if err := spendModelCall(ctx); err != nil {
		return nil, err
	}
	return p.call(ctx, info, req)
}

// call makes one model call that was drawn from the budget already.
func (p *Planner) call(ctx context.Context, info *orchestrate.PlannerInfo, req *llm.Request) (*llm.Response, error) {
	info.ModelCalls++
	resp, err := p.opts.Model.Generate(ctx, req)
	return account(info, resp, err)
}

// spendModelCall draws one model call from the budget of the request ctx
// runs for: planning, RESPOND, reflection and the reactive fallback's
// turns count against it like an agent's.
func spendModelCall(ctx context.Context) error {
	b, _ := toolcontext.BudgetFrom(ctx)
	return b.Spend(budget.ModelCalls, 1)
}

// account records in info the outcome of one model call counted in
// info.ModelCalls, and passes it on.
func account(info *orchestrate.PlannerInfo, resp *llm.Response, err error) (*llm.Response, error) {
	if err != nil {
		if errors.Is(err, llm.ErrInputRequired) {
			info.ModelCalls-- // the call happens in the client's next round
		}
		return nil, err
	}
	info.InputTokens += resp.Usage.InputTokens
	info.OutputTokens += resp.Usage.OutputTokens
	if resp.Model != "" && info.Model == "" {
		info.Model = resp.Model
	}
	return resp, nil
}

// planningAnswer returns the answer as text for the record, and the call
// of the planning tool if the model made one.
func planningAnswer(resp *llm.Response) (string, *llm.ToolCall) {
	for i := range resp.ToolCalls {
		if resp.ToolCalls[i].Name == ToolName {
			tc := resp.ToolCalls[i]
			return string(tc.Arguments), &tc
		}
	}
	if len(resp.ToolCalls) > 0 {
		tc := resp.ToolCalls[0]
		b, _ := json.Marshal(tc)
		return string(b), nil
	}
	return resp.Text, nil
}

// decode reads a plan from the planning call's arguments or, without one,
// from JSON in the text.
func (p *Planner) decode(tool *Tool, call *llm.ToolCall, text string) (*orchestrate.Plan, []*orchestrate.Issue) {
	var raw json.RawMessage
	if call != nil {
		raw = call.Arguments
	} else {
		var err error
		if raw, err = llm.ExtractJSON(text); err != nil {
			return nil, []*orchestrate.Issue{{Code: orchestrate.CodeInvalidJSON,
				Message: fmt.Sprintf("the answer did not call %s and holds no JSON plan; call %s with {\"type\": \"tool_calls\", ...} or {\"type\": \"direct_response\", ...}", ToolName, ToolName)}}
		}
	}
	return orchestrate.DecodePlan(tool.cleanArguments(raw))
}

// planTimeout is the plan's deadline for req.
func (p *Planner) planTimeout(ctx context.Context, req *orchestrate.Request) time.Duration {
	d := p.opts.Engine.Limits().PlanTimeout
	if req.TimeoutMS > 0 {
		d = min(d, time.Duration(req.TimeoutMS)*time.Millisecond)
	}
	b, _ := toolcontext.BudgetFrom(ctx)
	return b.Within(d) // what is left of the request's time
}

// timeoutError makes a model call that ran out of time match
// context.DeadlineExceeded, so the run reports it as a timeout.
func timeoutError(ctx context.Context, err error) error {
	if errors.Is(err, llm.ErrTimeout) || ctx.Err() == context.DeadlineExceeded {
		return &deadlineError{err}
	}
	return err
}

type deadlineError struct{ err error }

func (e *deadlineError) Error() string        { return e.err.Error() }
func (e *deadlineError) Unwrap() error        { return e.err }
func (e *deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }
