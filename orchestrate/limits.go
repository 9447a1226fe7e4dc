package orchestrate

import "time"

// Limits bound what one orchestration may do. The configuration sets them;
// a request may only lower them.
type Limits struct {
	// MaxDepth is how many orchestrations may enclose one another.
	MaxDepth int `json:"max_depth" yaml:"max_depth"`
	// MaxSteps caps the tool steps of a plan, every leaf counted.
	MaxSteps int `json:"max_steps" yaml:"max_steps"`
	// MaxParallel caps how many tool steps run at once.
	MaxParallel int `json:"max_parallel" yaml:"max_parallel"`
	// MaxNesting caps how deeply parallel groups nest.
	MaxNesting int `json:"max_nesting" yaml:"max_nesting"`
	// MaxAttempts caps a step's retry.max_attempts.
	MaxAttempts int `json:"max_attempts" yaml:"max_attempts"`
	// StepTimeout bounds each tool step.
	StepTimeout time.Duration `json:"step_timeout" yaml:"step_timeout"`
	// PlanTimeout bounds the whole plan.
	PlanTimeout time.Duration `json:"plan_timeout" yaml:"plan_timeout"`
	// MaxStepOutputBytes caps a step's output in the response; larger ones
	// are replaced by a truncation marker (templates still see all of it).
	MaxStepOutputBytes int `json:"max_step_output_bytes" yaml:"max_step_output_bytes"`
	// MaxResponseBytes caps the whole response.
	MaxResponseBytes int `json:"max_response_bytes" yaml:"max_response_bytes"`
	// MaxTemplates caps the template references in one plan.
	MaxTemplates int `json:"max_templates" yaml:"max_templates"`
	// MaxArgumentBytes caps a step's arguments as JSON once their
	// templates are resolved: a step that would pass more fails with
	// too_large before its tool is called.
	MaxArgumentBytes int `json:"max_argument_bytes" yaml:"max_argument_bytes"`
	// MaxRunBytes caps what one run's steps hold together: their outputs
	// and resolved arguments, as JSON.
	MaxRunBytes int `json:"max_run_bytes" yaml:"max_run_bytes"`
	// MaxMemoryBytes caps what all the runs of a server hold together;
	// new runs are refused (busy) when one more might pass it, or when
	// the live heap is over it.
	MaxMemoryBytes int64 `json:"max_memory_bytes" yaml:"max_memory_bytes"`
	// MaxIterations caps the elements one for_each loop runs its body for.
	MaxIterations int `json:"max_iterations" yaml:"max_iterations"`
	// MaxToolCalls caps the tool calls of one run, every iteration's
	// counted, so that loops cannot fan out without bound. It is never
	// below MaxSteps.
	MaxToolCalls int `json:"max_tool_calls" yaml:"max_tool_calls"`
	// MaxModelCalls caps the model calls of one request: planning, the
	// turns of its agents and of the reactive fallback, the answer
	// written after a run, however deeply they nest.
	MaxModelCalls int `json:"max_model_calls" yaml:"max_model_calls"`
	// MaxAgentRuns caps the agent runs of one request, however deeply
	// they nest (an agent calling agents, a loop over agent steps).
	MaxAgentRuns int `json:"max_agent_runs" yaml:"max_agent_runs"`
	// PauseTTL is how long a paused run waits for the client's results.
	PauseTTL time.Duration `json:"pause_ttl" yaml:"pause_ttl"`
}

// DefaultLimits returns the design's limits.
func DefaultLimits() Limits {
	return Limits{
		MaxDepth:           3,
		MaxSteps:           12,
		MaxParallel:        4,
		MaxNesting:         2,
		MaxAttempts:        5,
		StepTimeout:        60 * time.Second,
		PlanTimeout:        300 * time.Second,
		MaxStepOutputBytes: 256 << 10,
		MaxResponseBytes:   2 << 20,
		MaxTemplates:       1000,
		MaxArgumentBytes:   4 << 20,
		MaxRunBytes:        64 << 20,
		MaxMemoryBytes:     1 << 30,
		MaxIterations:      64,
		MaxToolCalls:       100,
		MaxModelCalls:      128,
		MaxAgentRuns:       32,
		PauseTTL:           time.Hour,
	}
}

// WithDefaults returns l with its zero fields filled from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = d.MaxSteps
	}
	if l.MaxParallel == 0 {
		l.MaxParallel = d.MaxParallel
	}
	if l.MaxNesting == 0 {
		l.MaxNesting = d.MaxNesting
	}
	if l.MaxAttempts == 0 {
		l.MaxAttempts = d.MaxAttempts
	}
	if l.StepTimeout == 0 {
		l.StepTimeout = d.StepTimeout
	}
	if l.PlanTimeout == 0 {
		l.PlanTimeout = d.PlanTimeout
	}
	if l.MaxStepOutputBytes == 0 {
		l.MaxStepOutputBytes = d.MaxStepOutputBytes
	}
	if l.MaxResponseBytes == 0 {
		l.MaxResponseBytes = d.MaxResponseBytes
	}
	if l.MaxTemplates == 0 {
		l.MaxTemplates = d.MaxTemplates
	}
	if l.MaxArgumentBytes == 0 {
		l.MaxArgumentBytes = d.MaxArgumentBytes
	}
	if l.MaxRunBytes == 0 {
		l.MaxRunBytes = d.MaxRunBytes
	}
	if l.MaxMemoryBytes == 0 {
		l.MaxMemoryBytes = d.MaxMemoryBytes
	}
	if l.MaxIterations == 0 {
		l.MaxIterations = d.MaxIterations
	}
	if l.MaxToolCalls == 0 {
		l.MaxToolCalls = max(d.MaxToolCalls, l.MaxSteps)
	}
	if l.MaxModelCalls == 0 {
		l.MaxModelCalls = d.MaxModelCalls
	}
	if l.MaxAgentRuns == 0 {
		l.MaxAgentRuns = d.MaxAgentRuns
	}
	if l.PauseTTL == 0 {
		l.PauseTTL = d.PauseTTL
	}
	return l
}

// forRequest lowers the limits to what req asks for.
func (l Limits) forRequest(req *Request) Limits {
	if req.MaxParallel > 0 && req.MaxParallel < l.MaxParallel {
		l.MaxParallel = req.MaxParallel
	}
	if req.TimeoutMS > 0 {
		if t := time.Duration(req.TimeoutMS) * time.Millisecond; t < l.PlanTimeout {
			l.PlanTimeout = t
		}
	}
	return l
}
