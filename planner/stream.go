package planner

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// streamPolicy returns the configured policy of streamed planning.
func (p *Planner) streamPolicy() string {
	if p.opts.Stream == "" {
		return orchestrate.StreamReadOnly
	}
	return p.opts.Stream
}

// generatePlan makes the planning call. When the model streams and the run
// can start steps early, the answer is streamed: the plan written so far
// is offered to the run's stream each time one more call of it is
// complete, so that its steps start while the model writes the rest.
func (p *Planner) generatePlan(ctx context.Context, info *orchestrate.PlannerInfo, req *llm.Request, tool *Tool) (*llm.Response, error) {
	sm, ok := p.opts.Model.(llm.StreamModel)
	st, hasStream := orchestrate.StreamFrom(ctx)
	policy := p.streamPolicy()
	if !ok || !hasStream || policy == orchestrate.StreamOff {
		return p.generate(ctx, info, req)
	}
	sc := newPlanScanner()
	call := -1
	flow := tool.hasFlow()
	// Each piece is scanned once and each call decoded once; a plan is
	// offered each time a call completes, up to limits.max_steps calls (a
	// plan with more is refused whole), so the work is linear in the
	// answer's bytes plus a bounded term in max_steps. A plan so far that
	// cannot be valid ends the offers.
	maxSteps := p.opts.Engine.Limits().MaxSteps
	offering := true
	onDelta := func(d llm.Delta) {
		if call < 0 && d.Name == ToolName {
			call = d.Call
		}
		if d.Call != call || d.Arguments == "" || !sc.write(d.Arguments) || !offering {
			return
		}
		if len(sc.elems) > maxSteps {
			offering = false
			return
		}
		plan := partialPlan(tool, sc)
		if plan == nil {
			offering = len(sc.elems) == 0
			return
		}
		pol := policy
		if _, done := sc.values["flow"]; flow && !done && pol == orchestrate.StreamAll {
			// A call may still be put in a loop or under a condition by
			// the flow the model has not written yet: only steps that
			// change nothing may start.
			pol = orchestrate.StreamReadOnly
		}
		st.Offer(plan, pol)
	}
	if err := spendModelCall(ctx); err != nil {
		return nil, err
	}
	info.ModelCalls++
	resp, err := sm.GenerateStream(ctx, req, onDelta)
	if err != nil && (errors.Is(err, llm.ErrBadRequest) || errors.Is(err, llm.ErrBadResponse)) && !errors.Is(err, llm.ErrTooLarge) && len(sc.buf) == 0 {
		// Some compatible servers refuse or ignore streaming requests:
		// ask as usual.
		p.log.DebugContext(ctx, "streaming request refused; asking without streaming", "error", err)
		st.Reject("the model's stream failed")
		info.ModelCalls--
		return p.call(ctx, info, req) // the same call, drawn from the budget once
	}
	if err != nil {
		st.Reject("the model's answer failed")
	}
	return account(info, resp, err)
}

// partialPlan decodes the plan written so far: its complete calls, and
// its flow once complete (the entries of the calls received). The plan's
// answer, return and reasoning are left for the whole plan: they may
// name calls still to come. It returns nil when the plan so far does not
// decode.
func partialPlan(tool *Tool, sc *planScanner) *orchestrate.Plan {
	if len(sc.elems) == 0 {
		return nil
	}
	doc := map[string]any{"type": "tool_calls"}
	var typ string
	if raw, ok := sc.values["type"]; ok && json.Unmarshal(raw, &typ) == nil && typ != "tool_calls" {
		return nil
	}
	key := "calls"
	if _, ok := sc.values["steps"]; ok || sc.key == "steps" {
		key = "steps"
	}
	for _, e := range sc.elems[len(sc.decoded):] {
		var v any
		if llm.DecodeArguments(e, &v) != nil {
			return nil
		}
		sc.decoded = append(sc.decoded, v)
	}
	elems := sc.decoded
	doc[key] = elems
	if raw, ok := sc.values["flow"]; ok {
		var flow []any
		if json.Unmarshal(raw, &flow) == nil {
			var mine []any
			for _, f := range flow {
				if fm, ok := f.(map[string]any); ok {
					if n, ok := fm["call"].(float64); ok && n >= 0 && int(n) < len(elems) {
						mine = append(mine, f)
					}
				}
			}
			doc["flow"] = mine
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil
	}
	plan, issues := orchestrate.DecodePlan(tool.cleanArguments(data))
	if len(issues) > 0 {
		return nil
	}
	return plan
}

// hasFlow reports whether the planning tool offers flow (loops and
// conditions given after the calls).
func (t *Tool) hasFlow() bool {
	for _, s := range []map[string]any{t.Strict, t.Loose} {
		if props, ok := s["properties"].(map[string]any); ok && props["flow"] != nil {
			return true
		}
	}
	return false
}
