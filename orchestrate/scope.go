package orchestrate

import (
	"slices"

	"github.com/orchestra-mcp/orchestra/registry"
)

// allowedTools is a catalog narrowed to the tools allow accepts.
type allowedTools struct {
	Tools
	allow func(name string) bool
}

func (t allowedTools) Lookup(name string) (registry.Tool, bool) {
	if !t.allow(name) {
		return registry.Tool{}, false
	}
	return t.Tools.Lookup(name)
}

func (t allowedTools) Names() []string {
	return slices.DeleteFunc(t.Tools.Names(), func(n string) bool { return !t.allow(n) })
}

// viewTools is a catalog in which toolFor's tools stand for the
// catalog's of the same name (RunOptions.ToolFor).
type viewTools struct {
	Tools
	toolFor func(name string) (registry.Tool, bool)
}

func (t viewTools) Lookup(name string) (registry.Tool, bool) {
	if tool, ok := t.toolFor(name); ok {
		return tool, true
	}
	return t.Tools.Lookup(name)
}

// Lower returns l with every limit o sets lower than l's taken from o: a
// request or a tenant may lower the limits, never raise them.
func (l Limits) Lower(o Limits) Limits {
	low := func(p *int, v int) {
		if v > 0 && v < *p {
			*p = v
		}
	}
	low(&l.MaxDepth, o.MaxDepth)
	low(&l.MaxSteps, o.MaxSteps)
	low(&l.MaxParallel, o.MaxParallel)
	low(&l.MaxNesting, o.MaxNesting)
	low(&l.MaxAttempts, o.MaxAttempts)
	low(&l.MaxStepOutputBytes, o.MaxStepOutputBytes)
	low(&l.MaxResponseBytes, o.MaxResponseBytes)
	low(&l.MaxTemplates, o.MaxTemplates)
	low(&l.MaxArgumentBytes, o.MaxArgumentBytes)
	low(&l.MaxRunBytes, o.MaxRunBytes)
	low(&l.MaxIterations, o.MaxIterations)
	low(&l.MaxToolCalls, o.MaxToolCalls)
	low(&l.MaxModelCalls, o.MaxModelCalls)
	low(&l.MaxAgentRuns, o.MaxAgentRuns)
	if o.StepTimeout > 0 && o.StepTimeout < l.StepTimeout {
		l.StepTimeout = o.StepTimeout
	}
	if o.PlanTimeout > 0 && o.PlanTimeout < l.PlanTimeout {
		l.PlanTimeout = o.PlanTimeout
	}
	return l
}
