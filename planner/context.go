package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// DefaultContextTokens caps the caller's context given to the model.
const DefaultContextTokens = 2000

// EstimateTokens estimates the tokens of a text: one per 4 bytes, rounded
// up, the usual rule of thumb for English and JSON with BPE tokenizers.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// contextText renders the caller's context for the model within budget
// tokens: the instructions and the facts first (each cut when it alone is
// over), then the conversation's turns, newest kept, oldest dropped, with
// a note of what was dropped. It is "" without a context.
func contextText(c *orchestrate.CallerContext, budget int) string {
	if c == nil || (c.Instructions == "" && len(c.Facts) == 0 && len(c.History) == 0) {
		return ""
	}
	limit := budget * 4 // bytes
	var parts []string
	used := 0
	add := func(s string) {
		if used+len(s) > limit {
			s = textcut.Truncate(s, max(0, limit-used))
		}
		used += len(s)
		parts = append(parts, s)
	}
	if c.Instructions != "" {
		add(orchestrate.CallerInstructions(c.Instructions))
	}
	if len(c.Facts) > 0 {
		var b strings.Builder
		b.WriteString("Facts of the caller's session:")
		for _, k := range slices.Sorted(maps.Keys(c.Facts)) {
			data, _ := json.Marshal(c.Facts[k])
			fmt.Fprintf(&b, "\n- %s: %s", k, data)
		}
		add(b.String())
	}
	if len(c.History) > 0 {
		parts = append(parts, orchestrate.ConversationText(c.History, limit-used, budget))
	}
	return strings.Join(parts, "\n\n")
}

// contextTokens is the planner's context budget.
func (p *Planner) contextTokens() int {
	if p.opts.ContextTokens > 0 {
		return p.opts.ContextTokens
	}
	return DefaultContextTokens
}

// planningMessage is the first message of a planning request: the goal and
// the bindings, the caller's context, and the lessons of past runs about
// the tools offered.
func (p *Planner) planningMessage(ctx context.Context, tool *Tool, req *orchestrate.Request) string {
	msg := userMessage(req.Prompt, req.Bindings) + p.contextPart(req.Context)
	if l := lessonsText(p.recall(ctx, tool.Tools)); l != "" {
		msg += "\n\n" + l
	}
	return msg
}

// contextPart is the configured instructions and the caller's context as
// a part of a message, or "": the operator's layer, the tenant's, then
// the request's own (see orchestrate.Instructions).
func (p *Planner) contextPart(c *orchestrate.CallerContext) string {
	var parts []string
	if text := p.opts.Instructions.Configured().Render(); text != "" {
		parts = append(parts, text)
	}
	if text := contextText(c, p.contextTokens()); text != "" {
		parts = append(parts, text)
	}
	if len(parts) == 0 {
		return ""
	}
	return "\n\n" + strings.Join(parts, "\n\n")
}

// withInstructions returns ctx carrying every layer of instructions of
// req, for the agents its plan runs.
func (p *Planner) withInstructions(ctx context.Context, req *orchestrate.Request) context.Context {
	in := p.opts.Instructions.Configured()
	if req.Context != nil {
		in.Caller = req.Context.Instructions
	}
	return orchestrate.WithInstructions(ctx, in)
}

// fallback is the request's fallback, else the configured one.
func (p *Planner) fallback(req *orchestrate.Request) string {
	if req.Fallback != "" {
		return req.Fallback
	}
	return p.opts.Fallback
}
