package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
)

// Planner is the planner block: the model (provider, model, key...) and how
// the planner uses it.
type Planner struct {
	llm.Config `yaml:",inline"`
	// Instructions are the operator's instructions, for every caller: the
	// first layer of instructions in planning, answering and agents'
	// requests, before the caller's tenant's and the request's own (see
	// orchestrate.Instructions). At most orchestrate.MaxInstructionBytes.
	Instructions string `yaml:"instructions,omitempty" json:"instructions,omitempty"`
	// Fallback is "reactive" to run a bounded tool loop whenever no valid
	// plan can be made, or "none" (the default); a request's own fallback
	// wins.
	Fallback string `yaml:"fallback,omitempty" json:"fallback,omitempty"`
	// ContextTokens caps the caller's context (instructions, conversation
	// turns, facts) passed to the planner and to the answer, in tokens
	// estimated as bytes / 4; the oldest turns are dropped first. Default
	// 2000.
	ContextTokens int `yaml:"context_tokens,omitempty" json:"context_tokens,omitempty"`
	// Insights is how many lessons from past runs the planner is shown for
	// the tools it offers. Default 8; 0 shows none (they are still kept).
	Insights *int `yaml:"insights,omitempty" json:"insights,omitempty"`
	// Reflection adds a one-sentence summary, written by the model, of
	// each failed run to the insights of its tools (one more model call
	// per failed run).
	Reflection bool `yaml:"reflection,omitempty" json:"reflection,omitempty"`
	// Stream says which steps may start while a model that streams
	// (openai, anthropic) is still writing the plan: "read_only" (the
	// default: tools annotated readOnlyHint), "off", or "all" (a step of
	// a plan then rejected may have done its work).
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`
}

// StreamPolicy returns the policy of streamed planning ("" for the
// planner's default).
func (p *Planner) StreamPolicy() string {
	if p == nil {
		return ""
	}
	return p.Stream
}

// PlannerOptions returns the planner's options the block sets: the
// fallback, the context budget, how many insights to show, reflection.
func (p *Planner) PlannerOptions() (fallback string, contextTokens, insights int, reflection bool) {
	if p == nil {
		return "", 0, 0, false
	}
	insights = 0 // the planner's default
	if p.Insights != nil {
		insights = *p.Insights
		if insights == 0 {
			insights = -1 // none
		}
	}
	return p.Fallback, p.ContextTokens, insights, p.Reflection
}

func (p *Planner) validate() []string {
	var problems []string
	if p.Fallback != "" && p.Fallback != planner.FallbackReactive && p.Fallback != "none" {
		problems = append(problems, fmt.Sprintf("planner.fallback must be %q or \"none\", not %q", planner.FallbackReactive, p.Fallback))
	}
	if p.ContextTokens < 0 {
		problems = append(problems, "planner.context_tokens must not be negative")
	}
	if p.Stream != "" && !slices.Contains(orchestrate.StreamPolicies, p.Stream) {
		problems = append(problems, fmt.Sprintf("planner.stream must be one of %s, not %q", strings.Join(orchestrate.StreamPolicies, ", "), p.Stream))
	}
	problems = append(problems, checkInstructions("planner.instructions", p.Instructions)...)
	if p.Insights != nil && *p.Insights < 0 {
		problems = append(problems, "planner.insights must not be negative (0 shows none)")
	}
	return problems
}

// checkInstructions refuses a configured layer of instructions longer
// than orchestrate.MaxInstructionBytes, rather than cutting it unseen.
func checkInstructions(key, text string) []string {
	if n := len(strings.TrimSpace(text)); n > orchestrate.MaxInstructionBytes {
		return []string{fmt.Sprintf("%s is %d bytes, above the %d a layer of instructions may have: shorten it", key, n, orchestrate.MaxInstructionBytes)}
	}
	return nil
}
