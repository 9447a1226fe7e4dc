package orchestrate

// AgentUsage sums what the agent steps of a run used: each agent reports
// its model calls and tokens in its response's metadata, and the run's
// envelope adds them up, so that one envelope says what its agents cost.
// The planner's own calls are in PlannerInfo.
type AgentUsage struct {
	// Runs counts the agent steps that answered.
	Runs       int `json:"runs"`
	ModelCalls int `json:"model_calls"`
	ToolCalls  int `json:"tool_calls"`
	TokensIn   int `json:"tokens_in"`
	TokensOut  int `json:"tokens_out"`
	// CostUSD sums the agents' metadata.cost_usd; absent unless every
	// agent that called a model has one (see the configuration's pricing).
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// agentUsage sums the metadata of the agent steps among recs, at any
// depth; nil when no agent step answered.
func agentUsage(recs []*StepRecord) *AgentUsage {
	var u AgentUsage
	var cost float64
	priced, costed := true, false
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, rec := range rs {
			walk(rec.Children)
			if rec.Type != "agent" {
				continue
			}
			out, _ := rec.Output.(map[string]any)
			md, ok := out["metadata"].(map[string]any)
			if !ok {
				continue
			}
			u.Runs++
			u.ModelCalls += count(md["model_calls"])
			u.ToolCalls += count(md["tool_calls"])
			u.TokensIn += count(md["tokens_in"])
			u.TokensOut += count(md["tokens_out"])
			if count(md["model_calls"]) > 0 {
				c, ok := md["cost_usd"].(float64)
				priced, costed, cost = priced && ok, true, cost+c
			}
		}
	}
	walk(recs)
	if u.Runs == 0 {
		return nil
	}
	if priced && costed {
		u.CostUSD = &cost
	}
	return &u
}

func count(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	}
	return 0
}
