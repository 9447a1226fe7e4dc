package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/nestful"
	"github.com/orchestra-mcp/orchestra/workflows"
)

// workflowRepeats measures a NESTFUL task done again with new arguments:
// by ReAct (its tool loop again), planned again (orchestra + answer, dag:
// one planner call), and called as the workflow saved from the first
// planned run (workflows.Infer, as save_as keeps it; its tool called with
// new values for its parameters, no model). The model and tools are the
// model section's simulations; tokens are counted the same way.
func workflowRepeats(ctx context.Context, c *options, r *report) error {
	ds, err := loadNestful(c, r)
	if ds == nil {
		return err
	}
	slow, fast := map[string]registry.Tool{}, map[string]registry.Tool{}
	for _, t := range ds.Tools {
		fast[t.Name] = t
		if t.Name == nestful.ResultTool {
			slow[t.Name] = t
		} else {
			slow[t.Name] = withLatency(t, c.toolLatency)
		}
	}
	samples := pickSamples(c, ds.Samples)
	const approachesN = 3
	names := [approachesN]string{"ReAct, again", "orchestra, planned again (+ answer, dag)", "orchestra, the saved workflow called"}
	type outcome struct {
		r      [approachesN]taskResult
		params int
		err    error
	}
	results := make([]outcome, len(samples))
	for i, err := range eachTask(samples, func(i int, s nestful.Sample) error {
		o := &results[i]
		var tools []registry.Tool
		for _, name := range s.ToolNames {
			if name != nestful.ResultTool {
				tools = append(tools, slow[name])
			}
		}
		planJSON, _ := json.Marshal(s.Plan)
		calls := asCalls(planJSON)
		plan, results, ok := withoutResult(calls)
		if !ok {
			plan = calls
		}
		answered := withAnswerText(plan, answerOf(s.Input, results), orchestrate.ScheduleDAG)
		// The first run, planned; its plan is what is saved.
		_, env, e, err := orchestraRun(ctx, c, s, tools, answered, false)
		if err != nil {
			return fmt.Errorf("planned: %w", err)
		}
		w, err := workflows.Infer("task", s.Input, env.Artifact.Plan, nil, e.Tools())
		if err != nil {
			return fmt.Errorf("saving: %w", err)
		}
		o.params = len(w.Parameters.Properties)
		args := newArguments(w)
		if _, err := w.Arguments(args); err != nil {
			return fmt.Errorf("new arguments %v: %w", args, err)
		}
		// Again: ReAct's loop, a planned run, the workflow.
		gold, err := goldSteps(ctx, s, fast)
		if err != nil {
			return err
		}
		if o.r[0], err = react(ctx, c, s, slow, gold); err != nil {
			return fmt.Errorf("react: %w", err)
		}
		if o.r[1], err = orchestraTask(ctx, c, s, tools, answered, false); err != nil {
			return fmt.Errorf("planned again: %w", err)
		}
		tool := workflows.Tool(w, workflows.ToolOptions{Engine: e, Resolve: func(context.Context, string) (*workflows.Workflow, error) { return w, nil }})
		start := time.Now()
		res, err := tool.Invoke(ctx, &registry.CallRequest{Arguments: args})
		o.r[2].wall = time.Since(start)
		if err != nil {
			return fmt.Errorf("workflow: %w", err)
		}
		if res.IsError {
			return fmt.Errorf("workflow: %v", res.Output())
		}
		return nil
	}) {
		results[i].err = err
	}
	var errs []error
	var total [approachesN]agg
	params := 0
	for _, o := range results {
		if o.err != nil {
			errs = append(errs, o.err)
			continue
		}
		params += o.params
		for k, t := range o.r {
			a := &total[k]
			a.n++
			a.calls += float64(t.calls)
			a.tin += float64(t.tokensIn)
			a.tout += float64(t.tokensOut)
			a.wall += msf(t.wall)
		}
	}
	for _, err := range errs[:min(len(errs), 5)] {
		fmt.Fprintln(r.w, "error:", err)
	}
	if total[0].n == 0 {
		return errors.Join(append(errs, errors.New("no task ran"))...)
	}
	n := float64(total[0].n)
	var rows [][]string
	for k, name := range names {
		t := total[k]
		rows = append(rows, []string{name, itoa(t.n), f2(t.calls / n), f1(t.tin / n), f1(t.tout / n), f1((t.tin + t.tout) / n), f1(t.wall / n),
			f2(total[0].wall / t.wall)})
	}
	fmt.Fprintf(r.w, "%d NESTFUL tasks done again with new arguments (%d failed); %.1f parameters per saved workflow; simulated model: %s per call + %s per output token; tool latency %s\n",
		total[0].n, len(errs), float64(params)/n, c.modelLatency, c.tokenLatency, c.toolLatency)
	return r.table("workflows", []string{"approach", "tasks", "model_calls", "tokens_in", "tokens_out", "tokens", "wall_ms", "speedup_vs_react"}, rows)
}

// goldSteps runs s's gold plan once on fast (the tools without latency),
// for the calls ReAct's model makes.
func goldSteps(ctx context.Context, s nestful.Sample, fast map[string]registry.Tool) ([]*orchestrate.StepRecord, error) {
	planJSON, _ := json.Marshal(s.Plan)
	req, issues := orchestrate.DecodeRequest(append(append([]byte(`{"plan":`), planJSON...), '}'))
	if len(issues) > 0 {
		return nil, fmt.Errorf("decoding: %v", issues[0])
	}
	var tools []registry.Tool
	for _, name := range s.ToolNames {
		tools = append(tools, fast[name])
	}
	e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(tools...), Limits: orchestrate.Limits{MaxSteps: 64, MaxTemplates: 4096}})
	env := e.Run(ctx, req)
	if !env.Artifact.Success {
		return nil, fmt.Errorf("the gold plan failed: %v", env.Artifact.Errors)
	}
	return env.Artifact.Steps, nil
}

// newArguments returns a call's arguments for w: every parameter the run
// gave a string or a number gets another value (an enum's kept).
func newArguments(w *workflows.Workflow) map[string]any {
	args := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(w.Parameters.Properties)) {
		p := w.Parameters.Properties[name]
		var def any
		if len(p.Default) > 0 {
			_ = json.Unmarshal(p.Default, &def)
		}
		switch v := def.(type) {
		case string:
			if len(p.Enum) == 0 {
				def = v + " (again)"
			}
		case float64:
			if len(p.Enum) == 0 {
				def = v + 1 // an integer stays one
			}
		}
		if def != nil {
			args[name] = def
		}
	}
	return args
}
