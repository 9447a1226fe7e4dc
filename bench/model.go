package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/orchestra-mcp/orchestra/internal/nestful"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// tokens estimates the tokens of a text the way the harness counts every
// prompt and answer: one token per 4 bytes of its JSON (rounded up), the
// usual rule of thumb for English text and JSON with BPE tokenizers.
func tokens(v any) int {
	data, _ := json.Marshal(v)
	return (len(data) + 3) / 4
}

// simModel is a model with a fixed latency per call. answer writes the
// answer; the usage is counted from the real request and answer.
type simModel struct {
	latency time.Duration
	answer  func(req *llm.Request) *llm.Response
}

func (m *simModel) Name() string { return "simulated" }

func (m *simModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	t := time.NewTimer(m.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	resp := m.answer(req)
	resp.Usage = llm.Usage{InputTokens: tokens(req), OutputTokens: tokens(resp.Text) + tokens(resp.ToolCalls)}
	resp.Model = "simulated"
	return resp, nil
}

// withLatency makes a tool take d longer.
func withLatency(t registry.Tool, d time.Duration) registry.Tool {
	call := t.Call
	t.Call = func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return call(ctx, req)
	}
	return t
}

// taskResult is one approach's cost on one task.
type taskResult struct {
	calls, tokensIn, tokensOut int
	wall                       time.Duration
}

const reactSystem = `You are an assistant with tools. Reach the user's goal step by step: call one tool, read its result, then decide the next call. When you have what the goal needs, answer the user in plain text without calling a tool. Do not invent results.`

func finalAnswer(goal string) string {
	return "Here is the result for: " + goal
}

// react runs a task the ReAct way (a reactive tool loop): one model call per
// tool call, each with the whole conversation so far, then one call for the
// answer. The model "decides" the gold calls, with the arguments the gold
// plan resolved to.
func react(ctx context.Context, lat time.Duration, s nestful.Sample, tools map[string]registry.Tool, gold []*orchestrate.StepRecord) (taskResult, error) {
	var defs []llm.ToolDef
	for _, name := range s.ToolNames {
		if name == nestful.ResultTool {
			continue
		}
		t := tools[name]
		var params map[string]any
		data, _ := json.Marshal(t.InputSchema)
		_ = json.Unmarshal(data, &params)
		defs = append(defs, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: params})
	}
	var res taskResult
	msgs := []llm.Message{{Role: llm.RoleUser, Content: s.Input}}
	next := 0
	m := &simModel{latency: lat, answer: func(req *llm.Request) *llm.Response {
		for next < len(gold) && gold[next].Tool == nestful.ResultTool {
			next++
		}
		if next == len(gold) {
			return &llm.Response{Text: finalAnswer(s.Input), StopReason: llm.StopEndTurn}
		}
		args, _ := json.Marshal(gold[next].Arguments)
		tc := llm.ToolCall{ID: fmt.Sprintf("call_%d", next), Name: gold[next].Tool, Arguments: args}
		next++
		return &llm.Response{ToolCalls: []llm.ToolCall{tc}, StopReason: llm.StopToolUse}
	}}
	start := time.Now()
	for {
		resp, err := m.Generate(ctx, &llm.Request{System: reactSystem, Messages: msgs, Tools: defs})
		if err != nil {
			return res, err
		}
		res.calls++
		res.tokensIn += resp.Usage.InputTokens
		res.tokensOut += resp.Usage.OutputTokens
		if len(resp.ToolCalls) == 0 {
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			var args map[string]any
			if err := json.Unmarshal(tc.Arguments, &args); err != nil {
				return res, err
			}
			out, err := tools[tc.Name].Invoke(ctx, &registry.CallRequest{Arguments: args})
			if err != nil {
				return res, fmt.Errorf("%s: %w", tc.Name, err)
			}
			data, _ := json.Marshal(out.Output())
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: string(data)})
		}
	}
	res.wall = time.Since(start)
	return res, nil
}

// orchestra runs a task through the prompt path: the planner (one model
// call, answered with the gold plan through __planning__), the engine, and
// the answer (one more call).
func orchestraTask(ctx context.Context, lat time.Duration, s nestful.Sample, tools []registry.Tool, planJSON []byte) (taskResult, error) {
	cat := registry.NewCatalog(tools...)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat, Limits: orchestrate.Limits{MaxSteps: 64, MaxTemplates: 4096}})
	m := &simModel{latency: lat, answer: func(req *llm.Request) *llm.Response {
		if len(req.Tools) > 0 && req.Tools[0].Name == planner.ToolName {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "plan", Name: planner.ToolName, Arguments: planJSON}}, StopReason: llm.StopToolUse}
		}
		return &llm.Response{Text: finalAnswer(s.Input), StopReason: llm.StopEndTurn}
	}}
	p := planner.New(planner.Options{Catalog: cat, Engine: e, Model: m})
	start := time.Now()
	env, err := p.Ask(ctx, &orchestrate.Request{Prompt: s.Input})
	wall := time.Since(start)
	if err != nil {
		return taskResult{}, err
	}
	a := env.Artifact
	if !a.Success || a.Planner == nil {
		return taskResult{}, fmt.Errorf("the plan did not succeed: %s %v %v", a.Status, a.Errors, a.ValidationErrors)
	}
	return taskResult{calls: a.Planner.ModelCalls, tokensIn: a.Planner.InputTokens, tokensOut: a.Planner.OutputTokens, wall: wall}, nil
}

func nestfulDir(c *options) string {
	if c.nestful != "" {
		return c.nestful
	}
	root, err := orchestraDir()
	if err != nil {
		return ""
	}
	return filepath.Join(root, "..", "shared", "datasets", "nestful")
}

// modelRoundTrips compares ReAct with orchestra's prompt path on the
// NESTFUL sequences.
func modelRoundTrips(ctx context.Context, c *options, r *report) error {
	dir := nestfulDir(c)
	if _, err := os.Stat(filepath.Join(dir, "executable-data.json")); err != nil {
		fmt.Fprintf(r.w, "skipped: the NESTFUL dataset is not at %q (set -nestful)\n", dir)
		return nil
	}
	ds, err := nestful.Load(dir)
	if err != nil {
		return err
	}
	byName := map[string]registry.Tool{}
	slow := map[string]registry.Tool{}
	for _, t := range ds.Tools {
		byName[t.Name] = t
		if t.Name == nestful.ResultTool {
			slow[t.Name] = t // the final answer, not a call
		} else {
			slow[t.Name] = withLatency(t, c.toolLatency)
		}
	}
	samples := ds.Samples
	if c.tasks > 0 && c.tasks < len(samples) {
		// every source, in proportion
		step := float64(len(samples)) / float64(c.tasks)
		var picked []nestful.Sample
		for i := range c.tasks {
			picked = append(picked, samples[int(float64(i)*step)])
		}
		samples = picked
	}
	type outcome struct {
		steps                int
		react, orch, orchDAG taskResult
		err                  error
	}
	results := make([]outcome, len(samples))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, s := range samples {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			o := &results[i]
			o.err = func() error {
				var tools, fast []registry.Tool
				for _, name := range s.ToolNames {
					tools = append(tools, slow[name])
					fast = append(fast, byName[name])
				}
				planJSON, _ := json.Marshal(s.Plan)
				// The gold plan once, without latency, for the arguments
				// ReAct's model would write.
				req, issues := orchestrate.DecodeRequest(append(append([]byte(`{"plan":`), planJSON...), '}'))
				if len(issues) > 0 {
					return fmt.Errorf("decoding: %v", issues[0])
				}
				e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(fast...), Limits: orchestrate.Limits{MaxSteps: 64, MaxTemplates: 4096}})
				env := e.Run(ctx, req)
				if !env.Artifact.Success {
					return fmt.Errorf("the gold plan failed: %v", env.Artifact.Errors)
				}
				gold := env.Artifact.Steps
				for _, g := range gold {
					if g.Tool != nestful.ResultTool {
						o.steps++
					}
				}
				var err error
				if o.react, err = react(ctx, c.modelLatency, s, slow, gold); err != nil {
					return fmt.Errorf("react: %w", err)
				}
				if o.orch, err = orchestraTask(ctx, c.modelLatency, s, tools, planJSON); err != nil {
					return fmt.Errorf("orchestra: %w", err)
				}
				var plan map[string]any
				_ = json.Unmarshal(planJSON, &plan)
				plan["schedule"] = orchestrate.ScheduleDAG
				dagJSON, _ := json.Marshal(plan)
				if o.orchDAG, err = orchestraTask(ctx, c.modelLatency, s, tools, dagJSON); err != nil {
					return fmt.Errorf("orchestra dag: %w", err)
				}
				return nil
			}()
			if o.err != nil {
				o.err = fmt.Errorf("%s #%d: %w", s.Source, s.Index, o.err)
			}
		})
	}
	wg.Wait()

	var errs []error
	byLen := map[int]*[3]agg{}
	var total [3]agg
	var ratios []float64
	for _, o := range results {
		if o.err != nil {
			errs = append(errs, o.err)
			continue
		}
		for k, t := range []taskResult{o.react, o.orch, o.orchDAG} {
			for _, a := range []*agg{&total[k], bucket(byLen, o.steps, k)} {
				a.n++
				a.calls += float64(t.calls)
				a.tin += float64(t.tokensIn)
				a.tout += float64(t.tokensOut)
				a.wall += msf(t.wall)
			}
		}
		ratios = append(ratios, float64(o.react.wall)/float64(o.orch.wall))
	}
	if len(errs) > 0 {
		for _, err := range errs[:min(len(errs), 5)] {
			fmt.Fprintln(r.w, "error:", err)
		}
		if len(errs) == len(results) {
			return errors.Join(errs...)
		}
	}
	n := float64(total[0].n)
	if n == 0 {
		return errors.New("no task ran")
	}
	names := []string{"ReAct", "orchestra", "orchestra (dag)"}
	var rows [][]string
	for k, name := range names {
		t := total[k]
		rows = append(rows, []string{name, itoa(t.n), f2(t.calls / n), f1(t.tin / n), f1(t.tout / n), f1((t.tin + t.tout) / n), f1(t.wall / n),
			f2(total[0].wall / t.wall), f2((total[0].tin + total[0].tout) / (t.tin + t.tout)), f2(total[0].calls / t.calls)})
	}
	fmt.Fprintf(r.w, "%d NESTFUL tasks, model latency %s per call, tool latency %s, tokens = JSON bytes / 4\n", total[0].n, c.modelLatency, c.toolLatency)
	if err := r.table("model", []string{"approach", "tasks", "model_calls", "tokens_in", "tokens_out", "tokens", "wall_ms", "speedup", "token_ratio", "call_ratio"}, rows); err != nil {
		return err
	}
	slices.Sort(ratios)
	fmt.Fprintf(r.w, "per task, ReAct's wall time over orchestra's: median %.2fx, min %.2fx, max %.2fx (LLMCompiler reported 1.8–3.7x)\n",
		ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])

	lens := make([]int, 0, len(byLen))
	for l := range byLen {
		lens = append(lens, l)
	}
	slices.Sort(lens)
	var lrows [][]string
	var xy [3]plotter.XYs
	for _, l := range lens {
		b := byLen[l]
		row := []string{itoa(l), itoa(b[0].n)}
		for k := range names {
			mean := b[k].wall / float64(b[k].n)
			row = append(row, f1(b[k].calls/float64(b[k].n)), f1(mean))
			xy[k] = append(xy[k], plotter.XY{X: float64(l), Y: mean / 1000})
		}
		lrows = append(lrows, row)
	}
	if err := r.table("model_by_length", []string{"tool_calls", "tasks", "react_calls", "react_ms", "orch_calls", "orch_ms", "dag_calls", "dag_ms"}, lrows); err != nil {
		return err
	}
	if err := r.linePlot("model_by_length", fmt.Sprintf("NESTFUL tasks: wall time by tool calls (model %s, tools %s)", c.modelLatency, c.toolLatency),
		"tool calls in the task", "mean wall time (s)", false, series{names[0], xy[0]}, series{names[1], xy[1]}, series{names[2], xy[2]}); err != nil {
		return err
	}
	bar := func(f func(a agg) float64) series {
		var s plotter.XYs
		for k := range names {
			s = append(s, plotter.XY{X: float64(k), Y: f(total[k]) / f(total[0])})
		}
		return series{xy: s}
	}
	calls, toks, wall := bar(func(a agg) float64 { return a.calls }), bar(func(a agg) float64 { return a.tin + a.tout }), bar(func(a agg) float64 { return a.wall })
	calls.name, toks.name, wall.name = "model calls", "tokens", "wall time"
	return r.barPlot("model", "ReAct against orchestra on NESTFUL (relative to ReAct = 1)", "relative to ReAct", names, calls, toks, wall)
}

// agg sums one approach's costs over tasks.
type agg struct {
	n                      int
	calls, tin, tout, wall float64
}

func bucket(m map[int]*[3]agg, l, k int) *agg {
	if m[l] == nil {
		m[l] = new([3]agg)
	}
	return &m[l][k]
}
