package orchestrate

import (
	"strings"

	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Schedules.
const (
	// ScheduleSequential runs top-level steps one after another (the default).
	ScheduleSequential = "sequential"
	// ScheduleDAG starts each step as soon as every step it references ended.
	ScheduleDAG = "dag"
)

// Merge strategies of a parallel group.
const (
	// MergeCollect: the group's output is an object keyed by child.
	MergeCollect = "collect"
	// MergeFirstSuccess: the first child to succeed wins; the rest are cancelled.
	MergeFirstSuccess = "first_success"
	// MergeAllSettled: every child runs; failed children leave null.
	MergeAllSettled = "all_settled"
)

// AgentToolPrefix starts the catalog name of every agent: the agent
// "researcher" is the tool "agent__researcher".
const AgentToolPrefix = "agent__"

// On-error policies of a step.
const (
	OnErrorHalt     = "halt"
	OnErrorContinue = "continue"
)

// Plan is a list of steps to run. Its JSON form is the "plan" of the
// agent_orchestrate input.
type Plan struct {
	// Type is "tool_calls" or "direct_response" when the plan came in the
	// planner format ({"type": "tool_calls", "calls": [...]}).
	Type string `json:"type,omitempty"`
	// Reasoning is the planner's explanation, kept for the record.
	Reasoning string `json:"reasoning,omitempty"`
	// Content is the answer of a direct_response plan, which runs nothing.
	Content string `json:"content,omitempty"`
	// Schedule is "sequential" (default) or "dag".
	Schedule string `json:"schedule,omitempty"`
	// Steps are the steps, in order.
	Steps []*Step `json:"steps"`
	// Answer is rendered after the run into artifact.answer: text with
	// ${...} references to the steps' outputs.
	Answer string `json:"answer,omitempty"`
	// Return is resolved after the run into artifact.result: a template
	// value (a reference, or an object or array holding references).
	Return any `json:"return,omitempty"`
}

// Step is a tool call or a parallel group.
type Step struct {
	ID          string `json:"id"`
	ResultKey   string `json:"result_key,omitempty"`
	Description string `json:"description,omitempty"`

	// A tool step.
	Tool string `json:"tool,omitempty"`
	// Agent names the agent of an agent step, whose Tool is its catalog
	// tool (AgentToolPrefix + Agent).
	Agent     string         `json:"agent,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	TimeoutMS int            `json:"timeout_ms,omitempty"`
	Retry     *Retry         `json:"retry,omitempty"`
	OnError   string         `json:"on_error,omitempty"`

	// A parallel group.
	Parallel       []*Step `json:"parallel,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	Merge          string  `json:"merge,omitempty"`

	// A loop (loop.go): Do runs once per element of the array ForEach
	// holds (a template such as "$list.output.items", or an array), the
	// element being $<As> and its index $<As>_index in Do's templates.
	// MaxConcurrency and Merge apply to the iterations.
	ForEach any    `json:"for_each,omitempty"`
	As      string `json:"as,omitempty"`
	Do      *Step  `json:"do,omitempty"`

	// When, on any step, is a template: the step runs only when its value
	// is truthy (when.go).
	When string `json:"when,omitempty"`

	index    int    // the top-level index this step is or is under
	path     string // where it is in the plan: steps[1].parallel[0]
	key      string // its key in its group's collected output
	explicit bool   // whether the id was given
	parent   *Step
	depth    int        // group nesting: 0 for top-level steps
	iter     *iteration // set on the root of one iteration of a loop's body
}

// Retry says how often a step is tried on transient failures.
type Retry struct {
	// MaxAttempts counts every attempt, the first one included.
	MaxAttempts int `json:"max_attempts"`
	// BackoffMS is the wait before the second attempt; it doubles after that.
	BackoffMS int `json:"backoff_ms,omitempty"`
	// MaxBackoffMS caps the wait between attempts.
	MaxBackoffMS int `json:"max_backoff_ms,omitempty"`
}

// IsGroup reports whether s is a parallel group.
func (s *Step) IsGroup() bool { return s.Parallel != nil }

// IsLoop reports whether s is a for_each loop.
func (s *Step) IsLoop() bool { return s.Do != nil }

// children returns the steps directly under s: a group's children, or a
// loop's body.
func (s *Step) children() []*Step {
	if s.Do != nil {
		return []*Step{s.Do}
	}
	return s.Parallel
}

// Index returns the top-level index of s or of the group it is in.
func (s *Step) Index() int { return s.index }

// Path returns where s is in the plan, e.g. "steps[1].parallel[0]".
func (s *Step) Path() string { return s.path }

// Key returns the key of s in its group's collected output.
func (s *Step) Key() string { return s.key }

// Leaves returns the tool steps written in the plan, in plan order: the
// body of a loop counts once, however many times it runs.
func (p *Plan) Leaves() []*Step {
	var out []*Step
	var walk func([]*Step)
	walk = func(steps []*Step) {
		for _, s := range steps {
			if s.IsGroup() || s.IsLoop() {
				walk(s.children())
			} else {
				out = append(out, s)
			}
		}
	}
	walk(p.Steps)
	return out
}

// All returns every step of the plan, groups and loops before their
// children and bodies.
func (p *Plan) All() []*Step {
	var out []*Step
	var walk func([]*Step)
	walk = func(steps []*Step) {
		for _, s := range steps {
			out = append(out, s)
			walk(s.children())
		}
	}
	walk(p.Steps)
	return out
}

// Request is the input of one orchestration.
type Request struct {
	// Plan is the plan to run. Exactly one of Plan and Prompt is set.
	Plan *Plan `json:"plan,omitempty"`
	// Prompt is a natural-language goal for the planner.
	Prompt string `json:"prompt,omitempty"`
	// Bindings are values templates reach as $bindings.name.
	Bindings map[string]any `json:"bindings,omitempty"`
	// TimeoutMS bounds the whole plan; 0 uses the configured limit.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// MaxParallel caps how many tool steps run at once; 0 uses the limit.
	MaxParallel int `json:"max_parallel,omitempty"`
	// DryRun validates and returns the normalized plan without running it.
	DryRun bool `json:"dry_run,omitempty"`
	// Fallback is "reactive" to fall back to a tool loop when planning fails.
	Fallback string `json:"fallback,omitempty"`
	// Response is "compact" or "full": how much of the envelope the
	// caller gets back. Empty takes the engine's default.
	Response string `json:"response,omitempty"`
	// Context is what the caller tells the planner besides the goal.
	Context *CallerContext `json:"context,omitempty"`
	// ClientTools are tools the caller runs itself; a plan that reaches
	// one pauses until the caller resumes it with the result.
	ClientTools []*ClientTool `json:"client_tools,omitempty"`
	// Resume continues a paused, interrupted or failed run instead of
	// starting one.
	Resume *ResumeRequest `json:"resume,omitempty"`
	// Background answers as soon as the request passed its checks, with
	// the run's exec id; the run goes on without its caller, who awaits
	// or cancels it (Await, Cancel) or reads its record.
	Background bool `json:"background,omitempty"`
	// Await waits for a background run's end, or reports its progress.
	Await *AwaitRequest `json:"await,omitempty"`
	// Cancel stops a background run.
	Cancel *CancelRequest `json:"cancel,omitempty"`
	// NoPause is set by tool loops (the reactive fallback), which cannot
	// wait for a client: a plan that would pause is refused before it
	// runs, with client_in_loop.
	NoPause bool `json:"-"`
	// loop, when set, is the tool loop's call this one-step run makes
	// (ChildRun.Call): its tool is told that step and run, not this run's.
	loop *toolcontext.Call
}

// Issue is a problem with a request or a plan: a validation error or a
// warning. Every issue names where it is and how to fix it.
type Issue struct {
	// Step is the top-level index of the step the issue is about.
	Step *int `json:"step,omitempty"`
	// StepID is the id of the (possibly nested) step.
	StepID string `json:"step_id,omitempty"`
	// Path is where in the input the issue is, e.g. "plan.steps[1].arguments.topic".
	Path string `json:"path,omitempty"`
	// Argument is the top-level argument name, for argument issues.
	Argument string `json:"argument,omitempty"`
	// Template is the template involved, as written.
	Template string `json:"template,omitempty"`
	// Code is a stable identifier of the kind of problem.
	Code Code `json:"code"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
	// AvailableFields lists what exists where a field was not found.
	AvailableFields []string `json:"available_fields,omitempty"`
	// Suggestions are the closest known names to an unknown one.
	Suggestions []string `json:"suggestions,omitempty"`
	// RetryAfterMS is how long to wait before trying again, for a
	// refusal that passes (queue_full).
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

func (i *Issue) Error() string {
	var b strings.Builder
	if i.Path != "" {
		b.WriteString(i.Path)
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	return b.String()
}
