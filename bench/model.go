package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/nestful"
)

// tokens estimates the tokens of a text the way the harness counts every
// prompt and answer: one token per 4 bytes of its JSON (rounded up), the
// usual rule of thumb for English text and JSON with BPE tokenizers.
func tokens(v any) int {
	data, _ := json.Marshal(v)
	return (len(data) + 3) / 4
}

// simModel is a model with a latency per call and per output token, as a
// provider's is: the call's fixed cost (network, prompt processing) and
// the time to write the answer. answer writes the answer; the usage is
// counted from the real request and answer.
type simModel struct {
	latency, perToken time.Duration
	answer            func(req *llm.Request) *llm.Response
}

func (m *simModel) Name() string { return "simulated" }

func (m *simModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp := m.answer(req)
	resp.Usage = llm.Usage{InputTokens: tokens(req), OutputTokens: tokens(resp.Text) + tokens(resp.ToolCalls)}
	resp.Model = "simulated"
	t := time.NewTimer(m.latency + time.Duration(resp.Usage.OutputTokens)*m.perToken)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return resp, nil
}

// streamSim is simModel streaming its answer: after the call's latency,
// the text and the tool calls' arguments arrive in pieces of 4 tokens
// (16 bytes), evenly over the time the output tokens take, so the last
// piece arrives when Generate would have answered.
type streamSim struct{ *simModel }

func (m streamSim) GenerateStream(ctx context.Context, req *llm.Request, onDelta func(llm.Delta)) (*llm.Response, error) {
	resp := m.answer(req)
	resp.Usage = llm.Usage{InputTokens: tokens(req), OutputTokens: tokens(resp.Text) + tokens(resp.ToolCalls)}
	resp.Model = "simulated"
	var deltas []llm.Delta
	for _, p := range pieces(resp.Text, 16) {
		deltas = append(deltas, llm.Delta{Text: p})
	}
	for i, tc := range resp.ToolCalls {
		for j, p := range pieces(string(tc.Arguments), 16) {
			d := llm.Delta{Call: i, Arguments: p}
			if j == 0 {
				d.Name = tc.Name
			}
			deltas = append(deltas, d)
		}
	}
	start := time.Now()
	writing := time.Duration(resp.Usage.OutputTokens) * m.perToken
	for k, d := range deltas {
		at := m.latency + writing*time.Duration(k+1)/time.Duration(len(deltas))
		if err := sleepCtx(ctx, at-time.Since(start)); err != nil {
			return nil, err
		}
		onDelta(d)
	}
	if err := sleepCtx(ctx, m.latency+writing-time.Since(start)); err != nil {
		return nil, err
	}
	return resp, nil
}

// pieces cuts s every n bytes.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
	// leanIn is ReAct's tokens in had its tools' schemas been rendered
	// the way the planner renders them (planner.Lean).
	leanIn int
}

const reactSystem = `You are an assistant with tools. Reach the user's goal step by step: call one tool, read its result, then decide the next call. When you have what the goal needs, answer the user in plain text without calling a tool. Do not invent results.`

func finalAnswer(goal string) string {
	return "Here is the result for: " + goal
}

// react runs a task the ReAct way (a reactive tool loop): one model call per
// tool call, each with the whole conversation so far, then one call for the
// answer. The model "decides" the gold calls, with the arguments the gold
// plan resolved to.
func react(ctx context.Context, c *options, s nestful.Sample, tools map[string]registry.Tool, gold []*orchestrate.StepRecord) (taskResult, error) {
	var defs, leanDefs []llm.ToolDef
	for _, name := range s.ToolNames {
		if name == nestful.ResultTool {
			continue
		}
		t := tools[name]
		var params map[string]any
		data, _ := json.Marshal(t.InputSchema)
		_ = json.Unmarshal(data, &params)
		defs = append(defs, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: params})
		leanDefs = append(leanDefs, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: planner.Lean(params)})
	}
	var res taskResult
	msgs := []llm.Message{{Role: llm.RoleUser, Content: s.Input}}
	next := 0
	m := &simModel{latency: c.modelLatency, perToken: c.tokenLatency, answer: func(req *llm.Request) *llm.Response {
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
		res.leanIn += tokens(&llm.Request{System: reactSystem, Messages: msgs, Tools: leanDefs})
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

// orchestraTask runs a task through the prompt path: the planner (one
// model call, answered with planJSON through __planning__), the engine,
// and, unless the plan's answer renders, the answer (one more call).
func orchestraTask(ctx context.Context, c *options, s nestful.Sample, tools []registry.Tool, planJSON []byte, stream bool) (taskResult, error) {
	res, _, _, err := orchestraRun(ctx, c, s, tools, planJSON, stream)
	return res, err
}

// orchestraRun is orchestraTask, returning the run's envelope and the
// engine it ran on too.
func orchestraRun(ctx context.Context, c *options, s nestful.Sample, tools []registry.Tool, planJSON []byte, stream bool) (taskResult, *orchestrate.Envelope, *orchestrate.Engine, error) {
	cat := registry.NewCatalog(tools...)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat, Limits: orchestrate.Limits{MaxSteps: 64, MaxTemplates: 4096}})
	sim := &simModel{latency: c.modelLatency, perToken: c.tokenLatency, answer: func(req *llm.Request) *llm.Response {
		if len(req.Tools) > 0 && req.Tools[0].Name == planner.ToolName {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "plan", Name: planner.ToolName, Arguments: planJSON}}, StopReason: llm.StopToolUse}
		}
		return &llm.Response{Text: finalAnswer(s.Input), StopReason: llm.StopEndTurn}
	}}
	var m llm.Model = sim
	if stream {
		// The planner starts the plan's steps while the model writes the rest.
		m = streamSim{sim}
	}
	p := planner.New(planner.Options{Catalog: cat, Engine: e, Model: m})
	start := time.Now()
	env, err := p.Ask(ctx, &orchestrate.Request{Prompt: s.Input})
	wall := time.Since(start)
	if err != nil {
		return taskResult{}, nil, nil, err
	}
	a := env.Artifact
	if !a.Success || a.Planner == nil {
		return taskResult{}, nil, nil, fmt.Errorf("the plan did not succeed: %s %v %v", a.Status, a.Errors, a.ValidationErrors)
	}
	for _, e := range a.Errors {
		if e.Code == orchestrate.CodeStreamRejected || e.Code == orchestrate.CodeStreamUnused {
			return taskResult{}, nil, nil, fmt.Errorf("an early call was wasted: %v", e)
		}
	}
	return taskResult{calls: a.Planner.ModelCalls, tokensIn: a.Planner.InputTokens, tokensOut: a.Planner.OutputTokens, wall: wall}, env, e, nil
}

// asCalls rewrites a gold plan ({"steps": [{"id", "tool", "arguments"}]})
// into what the planning prompt asks a model to write: {"calls":
// [{"tool_name", "arguments"}]}, call i's output referenced as $i.
func asCalls(planJSON []byte) []byte {
	var plan map[string]any
	_ = json.Unmarshal(planJSON, &plan)
	steps, _ := plan["steps"].([]any)
	index := map[string]int{}
	for i, st := range steps {
		m, _ := st.(map[string]any)
		if id, ok := m["id"].(string); ok {
			index[id] = i
		}
	}
	ref := regexp.MustCompile(`\$(\{?)([A-Za-z_][A-Za-z0-9_-]*)\b`)
	var rewrite func(v any) any
	rewrite = func(v any) any {
		switch v := v.(type) {
		case string:
			return ref.ReplaceAllStringFunc(v, func(m string) string {
				sub := ref.FindStringSubmatch(m)
				if i, ok := index[sub[2]]; ok {
					return fmt.Sprintf("$%s%d", sub[1], i)
				}
				return m
			})
		case map[string]any:
			for k, e := range v {
				v[k] = rewrite(e)
			}
		case []any:
			for i, e := range v {
				v[i] = rewrite(e)
			}
		}
		return v
	}
	calls := make([]any, 0, len(steps))
	for _, st := range steps {
		m, _ := st.(map[string]any)
		calls = append(calls, map[string]any{"tool_name": m["tool"], "arguments": rewrite(m["arguments"])})
	}
	delete(plan, "steps")
	plan["calls"] = calls
	data, _ := json.Marshal(plan)
	return data
}

// withoutResult takes NESTFUL's closing var_result call, its device for
// collecting a sequence's results, out of a plan in the planning format and
// returns the plan and the call's arguments: ReAct neither offers nor calls
// it (its model ends with a text answer), and a plan has its own way to
// hand results back, its return value or its answer. ok is false when the
// plan does not end with that call.
func withoutResult(planJSON []byte) (plan []byte, results map[string]any, ok bool) {
	var p map[string]any
	_ = json.Unmarshal(planJSON, &p)
	calls, _ := p["calls"].([]any)
	if len(calls) < 2 {
		return planJSON, nil, false
	}
	last, _ := calls[len(calls)-1].(map[string]any)
	if last["tool_name"] != nestful.ResultTool {
		return planJSON, nil, false
	}
	results, _ = last["arguments"].(map[string]any)
	p["calls"] = calls[:len(calls)-1]
	data, _ := json.Marshal(p)
	return data, results, true
}

// withReturn returns the plan with return set to v.
func withReturn(planJSON []byte, v any) []byte {
	var p map[string]any
	_ = json.Unmarshal(planJSON, &p)
	p["return"] = v
	data, _ := json.Marshal(p)
	return data
}

// answerOf is the final answer of ReAct's model with the results
// interpolated ("k: ${2.output}, ..."), the way a plan's answer writes
// them.
func answerOf(goal string, results map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(results)) {
		v := results[k]
		if s, ok := v.(string); ok && strings.HasPrefix(s, "$") && !strings.HasPrefix(s, "${") {
			v = "${" + s[1:] + "}"
		}
		if s, ok := v.(string); ok {
			parts = append(parts, k+": "+s)
			continue
		}
		data, _ := json.Marshal(v)
		parts = append(parts, k+": "+string(data))
	}
	return finalAnswer(goal) + ": " + strings.Join(parts, ", ")
}

// withAnswer returns the plan (in the planning format, asCalls) with an
// answer written the way the ReAct model's final answer is, the results
// interpolated from the last call's output, and schedule set when it is
// not empty.
func withAnswer(planJSON []byte, goal, schedule string) []byte {
	var plan map[string]any
	_ = json.Unmarshal(planJSON, &plan)
	calls, _ := plan["calls"].([]any)
	if len(calls) > 0 {
		plan["answer"] = fmt.Sprintf("%s: ${%d.output}", finalAnswer(goal), len(calls)-1)
	}
	return withSchedule(plan, schedule)
}

// withAnswerText returns the plan with the answer and schedule set.
func withAnswerText(planJSON []byte, answer, schedule string) []byte {
	var plan map[string]any
	_ = json.Unmarshal(planJSON, &plan)
	plan["answer"] = answer
	return withSchedule(plan, schedule)
}

func withSchedule(plan map[string]any, schedule string) []byte {
	if schedule != "" {
		plan["schedule"] = schedule
	}
	data, _ := json.Marshal(plan)
	return data
}

// fanOut reports whether a NESTFUL plan has at least two tool steps that
// depend on no other step: they can run at the same time.
func fanOut(plan map[string]any) bool {
	steps, _ := plan["steps"].([]any)
	free := 0
	for _, st := range steps {
		m, _ := st.(map[string]any)
		if m["tool"] == nestful.ResultTool {
			continue
		}
		data, _ := json.Marshal(m["arguments"])
		if !strings.Contains(string(data), ".output") {
			free++
		}
	}
	return free >= 2
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

// loadNestful loads the NESTFUL dataset, or says in the report that the
// section is skipped without it (nil, nil).
func loadNestful(c *options, r *report) (*nestful.Dataset, error) {
	dir := nestfulDir(c)
	if _, err := os.Stat(filepath.Join(dir, "executable-data.json")); err != nil {
		fmt.Fprintf(r.w, "skipped: the NESTFUL dataset is not at %q (set -nestful)\n", dir)
		return nil, nil
	}
	return nestful.Load(dir)
}

// modelRoundTrips compares ReAct with orchestra's prompt path on the
// NESTFUL sequences.
// pickSamples returns c.tasks of samples (all when c.tasks is 0), every
// source in proportion.
func pickSamples(c *options, samples []nestful.Sample) []nestful.Sample {
	if c.tasks <= 0 || c.tasks >= len(samples) {
		return samples
	}
	step := float64(len(samples)) / float64(c.tasks)
	var picked []nestful.Sample
	for i := range c.tasks {
		picked = append(picked, samples[int(float64(i)*step)])
	}
	return picked
}

// eachTask runs task for every sample, 32 at a time (the model and the
// tools are simulated: mostly sleeps), and returns the error of each,
// named by its sample.
func eachTask(samples []nestful.Sample, task func(i int, s nestful.Sample) error) []error {
	errs := make([]error, len(samples))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, s := range samples {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := task(i, s); err != nil {
				errs[i] = fmt.Errorf("%s #%d: %w", s.Source, s.Index, err)
			}
		})
	}
	wg.Wait()
	return errs
}

func modelRoundTrips(ctx context.Context, c *options, r *report) error {
	ds, err := loadNestful(c, r)
	if ds == nil {
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
	samples := pickSamples(c, ds.Samples)
	type outcome struct {
		steps  int
		fanOut bool
		r      [nApproaches]taskResult
		err    error
	}
	results := make([]outcome, len(samples))
	for i, err := range eachTask(samples, func(i int, s nestful.Sample) error {
		o := &results[i]
		var tools, fast []registry.Tool
		for _, name := range s.ToolNames {
			tools = append(tools, slow[name])
			fast = append(fast, byName[name])
		}
		planJSON, _ := json.Marshal(s.Plan)
		o.fanOut = fanOut(s.Plan)
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
		if o.r[0], err = react(ctx, c, s, slow, gold); err != nil {
			return fmt.Errorf("react: %w", err)
		}
		calls := asCalls(planJSON)
		plans := [nApproaches][]byte{1: calls, 2: withAnswer(calls, s.Input, ""), 3: withAnswer(calls, s.Input, orchestrate.ScheduleDAG)}
		plans[4] = plans[3]
		offered := tools
		if plan, results, ok := withoutResult(calls); ok {
			// The results in the return value or the answer, as ReAct
			// hands them back without a var_result call.
			plans[1] = withReturn(plan, results)
			plans[2] = withAnswerText(plan, answerOf(s.Input, results), "")
			plans[3] = withAnswerText(plan, answerOf(s.Input, results), orchestrate.ScheduleDAG)
			plans[4] = plans[3]
			offered = slices.DeleteFunc(slices.Clone(tools), func(t registry.Tool) bool { return t.Name == nestful.ResultTool })
		}
		for k := 1; k < nApproaches; k++ {
			if o.r[k], err = orchestraTask(ctx, c, s, offered, plans[k], approaches[k] == streamingApproach); err != nil {
				return fmt.Errorf("%s: %w", approaches[k], err)
			}
		}
		return nil
	}) {
		results[i].err = err
	}

	var errs []error
	byLen := map[int]*[nApproaches]agg{}
	var total, fan [nApproaches]agg
	var ratios []float64
	for _, o := range results {
		if o.err != nil {
			errs = append(errs, o.err)
			continue
		}
		for k, t := range o.r {
			sums := []*agg{&total[k], bucket(byLen, o.steps, k)}
			if o.fanOut {
				sums = append(sums, &fan[k])
			}
			for _, a := range sums {
				a.n++
				a.calls += float64(t.calls)
				a.tin += float64(t.tokensIn)
				a.tout += float64(t.tokensOut)
				a.wall += msf(t.wall)
			}
		}
		ratios = append(ratios, float64(o.r[0].wall)/float64(o.r[nApproaches-1].wall))
	}
	if len(errs) > 0 {
		for _, err := range errs[:min(len(errs), 5)] {
			fmt.Fprintln(r.w, "error:", err)
		}
		if len(errs) == len(results) {
			return errors.Join(errs...)
		}
	}
	if total[0].n == 0 {
		return errors.New("no task ran")
	}
	names := approaches[:]
	rowsOf := func(sums [nApproaches]agg) [][]string {
		n := float64(sums[0].n)
		var rows [][]string
		for k, name := range names {
			t := sums[k]
			rows = append(rows, []string{name, itoa(t.n), f2(t.calls / n), f1(t.tin / n), f1(t.tout / n), f1((t.tin + t.tout) / n), f1(t.wall / n),
				f2(sums[0].wall / t.wall), f2((t.tin + t.tout) / (sums[0].tin + sums[0].tout)), f2(t.calls / sums[0].calls)})
		}
		return rows
	}
	header := []string{"approach", "tasks", "model_calls", "tokens_in", "tokens_out", "tokens", "wall_ms", "speedup", "tokens_vs_react", "calls_vs_react"}
	fmt.Fprintf(r.w, "%d NESTFUL tasks, simulated model: %s per call + %s per output token; tool latency %s; tokens = JSON bytes / 4\n", total[0].n, c.modelLatency, c.tokenLatency, c.toolLatency)
	if err := r.table("model", header, rowsOf(total)); err != nil {
		return err
	}
	leanIn := 0.0
	for _, o := range results {
		if o.err == nil {
			leanIn += float64(o.r[0].leanIn)
		}
	}
	if n := float64(total[0].n); n > 0 {
		react := (leanIn + total[0].tout) / n
		fmt.Fprintf(r.w, "ReAct with its tools' schemas rendered as the planner renders them (planner.Lean): %.1f tokens per task in, %.1f in all; %s: %.2fx of that\n",
			leanIn/n, react, names[2], (total[2].tin+total[2].tout)/n/react)
	}
	if fan[0].n > 0 {
		fmt.Fprintf(r.w, "the %d fan-out tasks (two or more tool steps that need no other step's output):\n", fan[0].n)
		if err := r.table("model_fanout", header, rowsOf(fan)); err != nil {
			return err
		}
	}
	slices.Sort(ratios)
	fmt.Fprintf(r.w, "per task, ReAct's wall time over %s's: median %.2fx, min %.2fx, max %.2fx (LLMCompiler reported 1.8–3.7x)\n",
		names[nApproaches-1], ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])

	lens := make([]int, 0, len(byLen))
	for l := range byLen {
		lens = append(lens, l)
	}
	slices.Sort(lens)
	var lrows [][]string
	var xy [nApproaches]plotter.XYs
	lheader := []string{"tool_calls", "tasks"}
	for k := range names {
		lheader = append(lheader, fmt.Sprintf("calls_%d", k), fmt.Sprintf("ms_%d", k))
	}
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
	if err := r.table("model_by_length", lheader, lrows); err != nil {
		return err
	}
	var lines []series
	for k, name := range names {
		lines = append(lines, series{name, xy[k]})
	}
	if err := r.linePlot("model_by_length", fmt.Sprintf("NESTFUL tasks: wall time by tool calls (model %s + %s/token, tools %s)", c.modelLatency, c.tokenLatency, c.toolLatency),
		"tool calls in the task", "mean wall time (s)", false, lines...); err != nil {
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

// The approaches the model section compares, in its tables' order.
const nApproaches = 5

var approaches = [nApproaches]string{"ReAct", "orchestra (plan, respond)", "orchestra + answer", "orchestra + answer (dag)", streamingApproach}

// streamingApproach is the plan of "orchestra + answer (dag)" written by a
// model that streams it: steps start while the model writes the rest.
const streamingApproach = "orchestra + streaming"

// agg sums one approach's costs over tasks.
type agg struct {
	n                      int
	calls, tin, tout, wall float64
}

func bucket(m map[int]*[nApproaches]agg, l, k int) *agg {
	if m[l] == nil {
		m[l] = new([nApproaches]agg)
	}
	return &m[l][k]
}
