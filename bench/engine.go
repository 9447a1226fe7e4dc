package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"gonum.org/v1/plot/plotter"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
)

func mustSchema(s string) *jsonschema.Schema {
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		panic(fmt.Sprintf("schema %s: %v", s, err))
	}
	return &sc
}

// noopTool returns the same small output at once.
func noopTool() registry.Tool {
	out := map[string]any{"id": "x", "count": 1.0, "items": []any{"a"}}
	return registry.Tool{
		Name: "noop", Description: "Returns at once.", Source: "bench",
		InputSchema:  mustSchema(`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"},"note":{"type":"string"}},"additionalProperties":false}`),
		OutputSchema: mustSchema(`{"type":"object","properties":{"id":{"type":"string"},"count":{"type":"integer"},"items":{"type":"array","items":{"type":"string"}}}}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			return &registry.Result{Structured: out}, nil
		},
	}
}

// sleepTool sleeps its ms argument, or until its context ends. With a
// log, it records how long each call numbered by its "step" argument
// really slept: timers wake late, more so on a loaded machine.
func sleepTool(log *sleepLog) registry.Tool {
	return registry.Tool{
		Name: "sleep", Description: "Sleeps ms milliseconds.", Source: "bench",
		InputSchema:  mustSchema(`{"type":"object","properties":{"ms":{"type":"number"},"step":{"type":"integer"},"after":{"type":"array","items":{"type":"number"}}},"required":["ms"]}`),
		OutputSchema: mustSchema(`{"type":"object","properties":{"slept_ms":{"type":"number"}}}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			ms, _ := req.Arguments["ms"].(float64)
			start := time.Now()
			t := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if step, ok := req.Arguments["step"].(float64); ok && log != nil {
				log.set(int(step), time.Since(start))
			}
			return &registry.Result{Structured: map[string]any{"slept_ms": ms}}, nil
		},
	}
}

// sleepLog holds how long each step of a DAG really slept.
type sleepLog struct {
	mu    sync.Mutex
	slept []time.Duration
}

func (l *sleepLog) reset(n int) {
	l.mu.Lock()
	l.slept = make([]time.Duration, n)
	l.mu.Unlock()
}

func (l *sleepLog) set(i int, d time.Duration) {
	l.mu.Lock()
	if i >= 0 && i < len(l.slept) {
		l.slept[i] = d
	}
	l.mu.Unlock()
}

func (l *sleepLog) get() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.slept)
}

func decode(js string) (*orchestrate.Request, error) {
	req, issues := orchestrate.DecodeRequest([]byte(js))
	if len(issues) > 0 {
		return nil, fmt.Errorf("decoding a plan: %v", issues[0])
	}
	return req, nil
}

// chainPlan is n noop steps, each but the first using the one before it:
// a whole-value reference, an integer reference and an interpolation (the
// plan of BenchmarkOverhead in orchestrate).
func chainPlan(n int) string {
	steps := make([]string, n)
	for i := range n {
		if i == 0 {
			steps[i] = `{"id":"s0","tool":"noop","arguments":{"id":"start","n":1}}`
			continue
		}
		steps[i] = fmt.Sprintf(`{"id":"s%d","tool":"noop","arguments":{"id":"$s%d.output.id","n":"$s%d.output.count","note":"after ${s%d.output.items[0]}"}}`, i, i-1, i-1, i-1)
	}
	return `{"plan":{"steps":[` + strings.Join(steps, ",") + `]}}`
}

// overhead measures validate + execute + envelope per step for chains of
// no-op steps.
func overhead(ctx context.Context, c *options, r *report) error {
	d := time.Second
	if c.quick {
		d = 50 * time.Millisecond
	}
	var rows [][]string
	var perStep, allocs plotter.XYs
	for _, n := range []int{1, 12, 100, 1000} {
		e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(noopTool()), Limits: orchestrate.Limits{MaxSteps: n, MaxTemplates: 4 * n}})
		req, err := decode(chainPlan(n))
		if err != nil {
			return err
		}
		if env := e.Run(ctx, req); !env.Artifact.Success { // warm up
			return fmt.Errorf("chain of %d: %s: %v", n, env.Artifact.Status, env.Artifact.Errors)
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		runs := 0
		start := time.Now()
		for time.Since(start) < d || runs < 3 {
			e.Run(ctx, req)
			runs++
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&m1)
		steps := float64(runs * n)
		ns := float64(elapsed.Nanoseconds()) / steps
		al := float64(m1.Mallocs-m0.Mallocs) / steps
		by := float64(m1.TotalAlloc-m0.TotalAlloc) / steps
		rows = append(rows, []string{itoa(n), itoa(runs), f1(ns / 1000), f1(al), f1(by / 1024), ms(elapsed / time.Duration(runs))})
		perStep = append(perStep, plotter.XY{X: float64(n), Y: ns / 1000})
		allocs = append(allocs, plotter.XY{X: float64(n), Y: al})
	}
	if err := r.table("overhead", []string{"steps", "runs", "us/step", "allocs/step", "KiB/step", "ms/run"}, rows); err != nil {
		return err
	}
	return r.linePlot("overhead", "Engine overhead per step (validate + execute + envelope)", "steps in the plan", "µs per step", true,
		series{"µs/step", perStep}, series{"allocs/step ÷ 10", scaleY(allocs, 0.1)})
}

func scaleY(xy plotter.XYs, f float64) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	for i, p := range xy {
		out[i] = plotter.XY{X: p.X, Y: p.Y * f}
	}
	return out
}

// dag is a random plan: step i sleeps ms[i] and needs the steps deps[i].
type dag struct {
	ms   []int
	deps [][]int
}

func randomDAG(rng *rand.Rand, n, lo, hi int) dag {
	g := dag{ms: make([]int, n), deps: make([][]int, n)}
	for i := range n {
		g.ms[i] = lo + rng.IntN(hi-lo+1)
		if i == 0 {
			continue
		}
		// up to 3 dependencies among the 8 steps before: deep but branching
		seen := map[int]bool{}
		for range rng.IntN(4) {
			j := max(0, i-1-rng.IntN(min(i, 8)))
			if !seen[j] {
				seen[j] = true
				g.deps[i] = append(g.deps[i], j)
			}
		}
	}
	return g
}

// longestChain is the longest chain through the DAG when step i takes d[i].
func (g dag) longestChain(d []time.Duration) time.Duration {
	finish := make([]time.Duration, len(d))
	var longest time.Duration
	for i := range d {
		var start time.Duration
		for _, dep := range g.deps[i] {
			start = max(start, finish[dep])
		}
		finish[i] = start + d[i]
		longest = max(longest, finish[i])
	}
	return longest
}

// criticalPath is the longest chain of sleeps; levels are the layers of a
// layered plan (a step's layer is one past its deepest dependency's).
func (g dag) criticalPath() (cp int, levels []int, layered int) {
	finish := make([]int, len(g.ms))
	levels = make([]int, len(g.ms))
	for i := range g.ms {
		start := 0
		for _, d := range g.deps[i] {
			start = max(start, finish[d])
			levels[i] = max(levels[i], levels[d]+1)
		}
		finish[i] = start + g.ms[i]
		cp = max(cp, finish[i])
	}
	longest := map[int]int{}
	for i, l := range levels {
		longest[l] = max(longest[l], g.ms[i])
	}
	for _, m := range longest {
		layered += m
	}
	return cp, levels, layered
}

func (g dag) step(i int) string {
	var after []string
	for _, d := range g.deps[i] {
		after = append(after, fmt.Sprintf(`"$s%d.output.slept_ms"`, d))
	}
	return fmt.Sprintf(`{"id":"s%d","tool":"sleep","arguments":{"ms":%d,"step":%d,"after":[%s]}}`, i, g.ms[i], i, strings.Join(after, ","))
}

func (g dag) plan(schedule string) string {
	steps := make([]string, len(g.ms))
	for i := range g.ms {
		steps[i] = g.step(i)
	}
	sched := ""
	if schedule == orchestrate.ScheduleDAG {
		sched = `"schedule":"dag",`
	}
	return `{"plan":{` + sched + `"steps":[` + strings.Join(steps, ",") + `]}}`
}

func (g dag) layeredPlan(levels []int) string {
	var groups [][]string
	for i, l := range levels {
		for len(groups) <= l {
			groups = append(groups, nil)
		}
		groups[l] = append(groups[l], g.step(i))
	}
	var steps []string
	for l, children := range groups {
		steps = append(steps, fmt.Sprintf(`{"id":"layer%d","parallel":[%s]}`, l, strings.Join(children, ",")))
	}
	return `{"plan":{"steps":[` + strings.Join(steps, ",") + `]}}`
}

// schedules runs random DAGs with the three schedules and compares their
// wall time with the critical path.
func schedules(ctx context.Context, c *options, r *report) error {
	sizes, perSize, lo, hi := []int{10, 25, 50, 100, 200}, 3, 2, 10
	if c.quick {
		sizes, perSize, lo, hi = []int{10, 50}, 1, 1, 3
	}
	rng := rand.New(rand.NewPCG(c.seed, 7))
	var rows [][]string
	var seqXY, layXY, dagXY plotter.XYs
	within, withinMeasured, withinBare, total := 0, 0, 0, 0
	log := &sleepLog{}
	for _, n := range sizes {
		e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(sleepTool(log)),
			Limits: orchestrate.Limits{MaxSteps: n, MaxParallel: n, MaxTemplates: 4 * n}})
		for k := range perSize {
			g := randomDAG(rng, n, lo, hi)
			cp, levels, layered := g.criticalPath()
			sum := 0
			for _, m := range g.ms {
				sum += m
			}
			wall := map[string]time.Duration{}
			var measured time.Duration // the dag run's critical path, from what its tools really slept
			for _, v := range []struct{ name, plan string }{
				{"sequential", g.plan(orchestrate.ScheduleSequential)},
				{"layered", g.layeredPlan(levels)},
				{"dag", g.plan(orchestrate.ScheduleDAG)},
			} {
				req, err := decode(v.plan)
				if err != nil {
					return err
				}
				log.reset(n)
				start := time.Now()
				env := e.Run(ctx, req)
				wall[v.name] = time.Since(start)
				if v.name == "dag" {
					measured = g.longestChain(log.get())
				}
				if !env.Artifact.Success {
					return fmt.Errorf("%s plan of %d steps: %s: %v %v", v.name, n, env.Artifact.Status, env.Artifact.Errors, env.Artifact.ValidationErrors)
				}
			}
			var bareMeasured time.Duration
			wall["go"], bareMeasured = g.bare()
			cpd := time.Duration(cp) * time.Millisecond
			near := func(wall, cp time.Duration) bool { return wall <= cp+cp/20+2*time.Millisecond }
			ok, okMeasured := near(wall["dag"], cpd), near(wall["dag"], measured)
			total++
			if ok {
				within++
			}
			if okMeasured {
				withinMeasured++
			}
			if near(wall["go"], cpd) {
				withinBare++
			}
			rows = append(rows, []string{itoa(n), itoa(k), itoa(len(uniq(levels))), itoa(sum), itoa(layered), itoa(cp),
				ms(bareMeasured), ms(wall["go"]), ms(wall["sequential"]), ms(wall["layered"]), ms(measured), ms(wall["dag"]),
				f2(float64(wall["dag"]) / float64(cpd)), fmt.Sprint(ok), f2(float64(wall["dag"]) / float64(measured)), fmt.Sprint(okMeasured)})
			x := float64(cp)
			seqXY = append(seqXY, plotter.XY{X: x, Y: msf(wall["sequential"])})
			layXY = append(layXY, plotter.XY{X: x, Y: msf(wall["layered"])})
			dagXY = append(dagXY, plotter.XY{X: x, Y: msf(wall["dag"])})
		}
	}
	if err := r.table("schedules", []string{"steps", "dag#", "layers", "sum_ms", "layered_ideal_ms", "critical_ms",
		"bare_go_slept_cp_ms", "bare_go_ms", "sequential_ms", "layered_ms", "dag_slept_cp_ms", "dag_ms",
		"dag/critical", "dag≤cp+5%+2ms", "dag/slept_cp", "dag≤slept_cp+5%+2ms"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(r.w, "within 5%% + 2 ms of the nominal critical path: dag %d of %d plans, bare goroutines %d of %d\n", within, total, withinBare, total)
	fmt.Fprintf(r.w, "dag within 5%% + 2 ms of the critical path its tools really slept: %d of %d plans\n", withinMeasured, total)
	return r.scatterPlot("schedules", "Wall time against the critical path (random DAGs of 10–200 steps)", "critical path (ms)", "wall time (ms)",
		series{"sequential", seqXY}, series{"parallel groups (layered)", layXY}, series{"dag", dagXY})
}

// bare runs the DAG with plain goroutines and timers, no engine: what the
// machine itself adds to the critical path (timer and scheduling latency).
// It returns the wall time and the critical path of what the sleeps really
// took.
func (g dag) bare() (wall, slept time.Duration) {
	done := make([]chan struct{}, len(g.ms))
	for i := range done {
		done[i] = make(chan struct{})
	}
	took := make([]time.Duration, len(g.ms))
	start := time.Now()
	for i := range g.ms {
		go func() {
			for _, d := range g.deps[i] {
				<-done[d]
			}
			t := time.Now()
			time.Sleep(time.Duration(g.ms[i]) * time.Millisecond)
			took[i] = time.Since(t)
			close(done[i])
		}()
	}
	for _, d := range done {
		<-d
	}
	return time.Since(start), g.longestChain(took)
}

func uniq(xs []int) map[int]bool {
	m := map[int]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// fanout runs one parallel group of N children that each sleep 50 ms.
func fanout(ctx context.Context, c *options, r *report) error {
	const sleep = 50
	reps := 10
	if c.quick {
		reps = 2
	}
	var rows [][]string
	var xy, ideal plotter.XYs
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		e := orchestrate.NewEngine(orchestrate.Options{Tools: registry.NewCatalog(sleepTool(nil)), Limits: orchestrate.Limits{MaxSteps: n, MaxParallel: n}})
		children := make([]string, n)
		for i := range children {
			children[i] = fmt.Sprintf(`{"id":"c%d","tool":"sleep","arguments":{"ms":%d}}`, i, sleep)
		}
		req, err := decode(fmt.Sprintf(`{"max_parallel":%d,"plan":{"steps":[{"id":"g","parallel":[%s]}]}}`, n, strings.Join(children, ",")))
		if err != nil {
			return err
		}
		var walls []time.Duration
		for range reps {
			start := time.Now()
			env := e.Run(ctx, req)
			walls = append(walls, time.Since(start))
			if !env.Artifact.Success {
				return fmt.Errorf("fan-out of %d: %s: %v", n, env.Artifact.Status, env.Artifact.Errors)
			}
		}
		s := summarize(walls)
		rows = append(rows, []string{itoa(n), itoa(reps), ms(s.p50), ms(s.max), ms(s.p50 - sleep*time.Millisecond), fmt.Sprint(n != 64 || s.p50 <= 60*time.Millisecond)})
		xy = append(xy, plotter.XY{X: float64(n), Y: msf(s.p50)})
		ideal = append(ideal, plotter.XY{X: float64(n), Y: sleep})
	}
	if err := r.table("fanout", []string{"children", "runs", "p50_ms", "max_ms", "over_50ms", "goal(64≤60ms)"}, rows); err != nil {
		return err
	}
	return r.linePlot("fanout", "Fan-out: N children sleeping 50 ms, max_parallel = N", "children", "wall time (ms, median)", true,
		series{"orchestra", xy}, series{"ideal (one sleep)", ideal})
}
