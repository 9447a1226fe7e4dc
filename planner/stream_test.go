package planner_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// streamTools are a read-only lookup and a write; call, when set, runs in
// every call of either before it answers (tests block there).
type streamTools struct {
	mu    sync.Mutex
	log   []string // "tool key" of each call, in order
	calls map[string]chan struct{}
	call  func(ctx context.Context, name, key string, n int) error
}

// started returns a channel closed when the tool is first called with key.
func (st *streamTools) started(key string) chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.calls == nil {
		st.calls = map[string]chan struct{}{}
	}
	if st.calls[key] == nil {
		st.calls[key] = make(chan struct{})
	}
	return st.calls[key]
}

func (st *streamTools) list() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.log)
}

func (st *streamTools) tools(t *testing.T) []registry.Tool {
	call := func(name string) registry.CallFunc {
		return func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			key := fmt.Sprint(req.Arguments["key"])
			ch := st.started(key)
			st.mu.Lock()
			st.log = append(st.log, name+" "+key)
			n := 0
			for _, l := range st.log {
				if l == name+" "+key {
					n++
				}
			}
			select {
			case <-ch:
			default:
				close(ch)
			}
			st.mu.Unlock()
			if st.call != nil {
				if err := st.call(ctx, name, key, n); err != nil {
					return nil, err
				}
			}
			return &registry.Result{Structured: map[string]any{"value": key + "-v"}}, nil
		}
	}
	in := schema(t, `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)
	out := schema(t, `{"type":"object","properties":{"value":{"type":"string"}},"required":["value"]}`)
	return []registry.Tool{
		{Name: "lookup", Description: "Look a key up.", InputSchema: in, OutputSchema: out,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, Call: call("lookup")},
		{Name: "write", Description: "Write a key.", InputSchema: in, OutputSchema: out,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}, Call: call("write")},
	}
}

// byCall cuts a plan's arguments before each of its calls: piece n holds
// call n.
func byCall(args string) []string {
	var cuts []int
	for i := 0; ; i++ {
		j := strings.Index(args[i:], `{"tool_name"`)
		if j < 0 {
			break
		}
		i += j
		cuts = append(cuts, i)
	}
	var out []string
	last := 0
	for _, c := range cuts[min(1, len(cuts)):] {
		out = append(out, args[last:c])
		last = c
	}
	return append(out, args[last:])
}

func streamPlanner(t *testing.T, st *streamTools, m llm.Model, policy string, attempts int) *planner.Planner {
	cat := registry.NewCatalog(st.tools(t)...)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
	return planner.New(planner.Options{Catalog: cat, Engine: e, Model: m, Stream: policy, Attempts: attempts})
}

const threeLookups = `{"type":"tool_calls","calls":[` +
	`{"tool_name":"lookup","arguments":{"key":"a"}},` +
	`{"tool_name":"lookup","arguments":{"key":"$0.output.value"}},` +
	`{"tool_name":"lookup","arguments":{"key":"c"}}]}`

// Step 1's tool is called before the model has written step 3: the fake
// stream does not send step 3 until it has.
func TestStreamStartsFirstStepBeforePlanEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		first := st.started("a")
		gated := false
		m := llm.NewScripted([]llm.Response{planning(threeLookups)}).Streaming(llm.StreamScript{
			Split: byCall,
			Before: func(ctx context.Context, call, piece int) error {
				if piece < 2 {
					return nil
				}
				select {
				case <-first:
					gated = true
					return nil
				case <-ctx.Done():
					return fmt.Errorf("step 1 did not start before step 3 was written: %w", context.Cause(ctx))
				}
			},
		})
		env, err := streamPlanner(t, st, m, "", 1).Run(t.Context(), &orchestrate.Request{Prompt: "look up"})
		if err != nil {
			t.Fatal(err)
		}
		a := env.Artifact
		if !a.Success || !gated {
			t.Fatalf("status %s, errors %v; step 3 written after step 1 started: %v", a.Status, a.Errors, gated)
		}
		// Each tool ran once: the run used the early calls' results.
		got := st.list()
		slices.Sort(got)
		if !slices.Equal(got, []string{"lookup a", "lookup a-v", "lookup c"}) {
			t.Errorf("calls %v, want each step's once", st.list())
		}
		if got := a.Steps[1].Output; fmt.Sprint(got) != "map[value:a-v-v]" {
			t.Errorf("step 2's output %v", got)
		}
		if len(a.Errors) != 0 {
			t.Errorf("errors %v", a.Errors)
		}
	})
}

// Without streaming the same plan waits for its end: the gate is never
// opened, and the model's stream fails; the policy "off" keeps today's path.
func TestStreamOffWaitsForThePlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		var before []string
		m := llm.NewScripted([]llm.Response{planning(threeLookups)}).Streaming(llm.StreamScript{
			Split: byCall,
			Before: func(ctx context.Context, call, piece int) error {
				before = append(before, fmt.Sprint(len(st.list())))
				return nil
			},
		})
		env, err := streamPlanner(t, st, m, orchestrate.StreamOff, 1).Run(t.Context(), &orchestrate.Request{Prompt: "look up"})
		if err != nil {
			t.Fatal(err)
		}
		if !env.Artifact.Success || len(st.list()) != 3 {
			t.Fatalf("status %s, calls %v", env.Artifact.Status, st.list())
		}
		if len(before) != 0 {
			t.Errorf("the planner streamed with the policy off: %v", before)
		}
	})
}

// The policy read_only starts only read-only tools early; all starts the
// others too.
func TestStreamPolicyReadOnly(t *testing.T) {
	plan := `{"type":"tool_calls","calls":[{"tool_name":"write","arguments":{"key":"w"}},{"tool_name":"lookup","arguments":{"key":"r"}},{"tool_name":"lookup","arguments":{"key":"z"}}]}`
	for _, tc := range []struct {
		policy     string
		earlyWrite bool
	}{{"", false}, {orchestrate.StreamReadOnly, false}, {orchestrate.StreamAll, true}} {
		t.Run("policy="+tc.policy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &streamTools{}
				var atLastPiece []string
				m := llm.NewScripted([]llm.Response{planning(plan)}).Streaming(llm.StreamScript{
					Split: byCall,
					Before: func(ctx context.Context, call, piece int) error {
						if piece == 2 {
							synctest.Wait() // the early calls have run or blocked
							atLastPiece = st.list()
						}
						return nil
					},
				})
				env, err := streamPlanner(t, st, m, tc.policy, 1).Run(t.Context(), &orchestrate.Request{Prompt: "w"})
				if err != nil || !env.Artifact.Success {
					t.Fatalf("%v %v", err, env.Artifact.Errors)
				}
				want := []string{"lookup r"}
				if tc.earlyWrite {
					want = []string{"lookup r", "write w"}
				}
				slices.Sort(atLastPiece)
				if !slices.Equal(atLastPiece, want) {
					t.Errorf("called before the plan ended: %v, want %v", atLastPiece, want)
				}
				if len(st.list()) != 3 {
					t.Errorf("calls %v", st.list())
				}
			})
		})
	}
}

// A plan whose whole text fails validation cancels the step started early
// and reports it; the repaired plan runs, its steps once each.
func TestStreamRejectedPlanCancelsEarlyStep(t *testing.T) {
	invalid := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"slow"}},{"tool_name":"nope","arguments":{"key":"x"}}]}`
	valid := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"slow"}},{"tool_name":"lookup","arguments":{"key":"b"}}]}`
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		cancelled := make(chan struct{})
		st.call = func(ctx context.Context, name, key string, n int) error {
			if key == "slow" && n == 1 {
				<-ctx.Done() // the first call waits until it is cancelled
				close(cancelled)
				return ctx.Err()
			}
			return nil
		}
		slow := st.started("slow")
		m := llm.NewScripted([]llm.Response{planning(invalid), planning(valid)}).Streaming(llm.StreamScript{
			Split: byCall,
			Before: func(ctx context.Context, call, piece int) error {
				if piece == 1 {
					<-slow // step 1 runs before the rest of the plan comes
				}
				return nil
			},
		})
		env, err := streamPlanner(t, st, m, "", 2).Run(t.Context(), &orchestrate.Request{Prompt: "x"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-cancelled:
		default:
			t.Fatalf("the early call of the rejected plan was not cancelled")
		}
		a := env.Artifact
		if !a.Success || a.Planner.Attempts != 2 {
			t.Fatalf("status %s, planner %+v, errors %v", a.Status, a.Planner, a.Errors)
		}
		var rejected []*orchestrate.Error
		for _, e := range a.Errors {
			if e.Code == orchestrate.CodeStreamRejected {
				rejected = append(rejected, e)
			}
		}
		if len(rejected) != 1 || rejected[0].StepID != a.Steps[0].ID || !strings.Contains(rejected[0].Message, "failed validation") || !strings.Contains(rejected[0].Message, "stopped before it answered") {
			t.Errorf("errors %v, want step 1 reported as cancelled because the plan failed validation", a.Errors)
		}
		// The cancelled call, then the repaired plan's: no step ran twice for one plan.
		got := st.list()
		slices.Sort(got)
		if !slices.Equal(got, []string{"lookup b", "lookup slow", "lookup slow"}) {
			t.Errorf("calls %v", st.list())
		}
		if fmt.Sprint(a.Steps[0].Output) != "map[value:slow-v]" {
			t.Errorf("step 1's output %v", a.Steps[0].Output)
		}
	})
}

// When the model gives up, the early call is cancelled and reported, and
// the run reports the plan's failure as before.
func TestStreamGaveUpReportsEarlyStep(t *testing.T) {
	invalid := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"a"}},{"tool_name":"nope","arguments":{"key":"x"}}]}`
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		m := llm.NewScripted([]llm.Response{planning(invalid)}).Streaming(llm.StreamScript{Split: byCall})
		env, err := streamPlanner(t, st, m, "", 1).Run(t.Context(), &orchestrate.Request{Prompt: "x"})
		if err != nil {
			t.Fatal(err)
		}
		a := env.Artifact
		if a.Success || len(a.ValidationErrors) == 0 {
			t.Fatalf("status %s, validation errors %v", a.Status, a.ValidationErrors)
		}
		var codes []orchestrate.Code
		for _, e := range a.Errors {
			codes = append(codes, e.Code)
		}
		if !slices.Contains(codes, orchestrate.CodeStreamRejected) || !slices.Contains(codes, orchestrate.CodePlannerFailed) {
			t.Errorf("error codes %v", codes)
		}
	})
}

// A call started early that the run did not use (the plan halted before
// its step) is reported when the run ends.
func TestStreamUnusedEarlyCallReported(t *testing.T) {
	plan := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"fail"}},{"tool_name":"lookup","arguments":{"key":"b"}}]}`
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		b := st.started("b")
		st.call = func(ctx context.Context, name, key string, n int) error {
			if key == "fail" {
				// Fail once step 2 has started: the plan then halts
				// before step 2's turn.
				select {
				case <-b:
				case <-ctx.Done():
				}
				return errors.New("no such key")
			}
			return nil
		}
		m := llm.NewScripted([]llm.Response{planning(plan)}).Streaming(llm.StreamScript{Split: byCall})
		env, err := streamPlanner(t, st, m, "", 1).Run(t.Context(), &orchestrate.Request{Prompt: "x"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-b:
		default:
			t.Fatalf("step 2 did not start early")
		}
		a := env.Artifact
		if a.Success || a.Steps[1].Status != orchestrate.StatusSkipped {
			t.Fatalf("status %s, steps %+v", a.Status, a.Steps)
		}
		var unused *orchestrate.Error
		for _, e := range a.Errors {
			if e.Code == orchestrate.CodeStreamUnused {
				unused = e
			}
		}
		if unused == nil || unused.StepID != a.Steps[1].ID || !strings.Contains(unused.Message, "did not use") {
			t.Errorf("errors %v, want step 2's early call reported unused", a.Errors)
		}
		if n := len(st.list()); n != 2 {
			t.Errorf("calls %v: the failed step ran again", st.list())
		}
	})
}

// A parallel group starts all its children once it is complete, when a run
// would start them all at once; with a smaller max_concurrency it waits.
func TestStreamStartsGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string
		early []string
	}{
		{"all at once", ``, []string{"lookup g1", "lookup g2"}},
		{"max_concurrency 1", `,"max_concurrency":1`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := `{"type":"tool_calls","calls":[{"parallel":[{"tool_name":"lookup","arguments":{"key":"g1"}},{"tool_name":"lookup","arguments":{"key":"g2"}}]` + tc.extra + `},` +
				`{"tool_name":"lookup","arguments":{"key":"z"}}]}`
			synctest.Test(t, func(t *testing.T) {
				st := &streamTools{}
				var atLast []string
				m := llm.NewScripted([]llm.Response{planning(plan)}).Streaming(llm.StreamScript{
					Split: func(args string) []string {
						i := strings.Index(args, `{"tool_name":"lookup","arguments":{"key":"z`)
						return []string{args[:i], args[i:]}
					},
					Before: func(ctx context.Context, call, piece int) error {
						if piece == 1 {
							synctest.Wait()
							atLast = st.list()
						}
						return nil
					},
				})
				env, err := streamPlanner(t, st, m, "", 1).Run(t.Context(), &orchestrate.Request{Prompt: "x"})
				if err != nil || !env.Artifact.Success {
					t.Fatalf("%v %v %v", err, env.Artifact.Errors, env.Artifact.ValidationErrors)
				}
				slices.Sort(atLast)
				if !slices.Equal(atLast, tc.early) {
					t.Errorf("called before the plan ended: %v, want %v", atLast, tc.early)
				}
				got := st.list()
				slices.Sort(got)
				if len(got) != 3 || got[0] != "lookup g1" || got[1] != "lookup g2" || len(env.Artifact.Errors) != 0 {
					t.Errorf("calls %v, errors %v", got, env.Artifact.Errors)
				}
			})
		})
	}
}

// A dry run starts nothing, streamed or not.
func TestStreamDryRunStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		m := llm.NewScripted([]llm.Response{planning(threeLookups)}).Streaming(llm.StreamScript{Split: byCall})
		env, err := streamPlanner(t, st, m, orchestrate.StreamAll, 1).Run(t.Context(), &orchestrate.Request{Prompt: "x", DryRun: true})
		if err != nil || !env.Artifact.Success {
			t.Fatalf("%v %v", err, env.Artifact.Errors)
		}
		if calls := st.list(); len(calls) != 0 {
			t.Errorf("a dry run called %v", calls)
		}
	})
}

// Early calls stay within the run's limit of tool calls.
func TestStreamWithinMaxToolCalls(t *testing.T) {
	plan := `{"type":"tool_calls","calls":[{"tool_name":"lookup","arguments":{"key":"a"}},{"tool_name":"lookup","arguments":{"key":"c"}}]}`
	synctest.Test(t, func(t *testing.T) {
		st := &streamTools{}
		cat := registry.NewCatalog(st.tools(t)...)
		e := orchestrate.NewEngine(orchestrate.Options{Tools: cat, Limits: orchestrate.Limits{MaxToolCalls: 1}})
		m := llm.NewScripted([]llm.Response{planning(plan)}).Streaming(llm.StreamScript{Split: byCall})
		p := planner.New(planner.Options{Catalog: cat, Engine: e, Model: m, Attempts: 1})
		env, err := p.Run(t.Context(), &orchestrate.Request{Prompt: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if env.Artifact.Success {
			t.Fatalf("the run passed its limit of one tool call")
		}
		if calls := st.list(); !slices.Equal(calls, []string{"lookup a"}) {
			t.Errorf("calls %v, want only the first (the limit is one call)", calls)
		}
	})
}

// TestStreamWorkIsLinear replays a model that streams thousands of calls,
// one piece each: the plan written so far used to be decoded and checked
// again at each piece (20,000 streamed `{}` took 170 s of CPU). Each piece
// is now scanned once and the offers end once the plan cannot be valid or
// passes limits.max_steps, so the memory the planning call allocates grows
// with the answer, not with its square. Allocation, unlike time, does not
// depend on the machine's load.
func TestStreamWorkIsLinear(t *testing.T) {
	const n = 5000
	for _, tc := range []struct{ name, call string }{
		{"empty calls", `{}`},
		{"valid calls past max_steps", `{"tool_name":"lookup","arguments":{"key":"k"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]string, n)
			for i := range calls {
				calls[i] = tc.call
			}
			plan := `{"type":"tool_calls","calls":[` + strings.Join(calls, ",") + `]}`
			m := llm.NewScripted([]llm.Response{planning(plan)}).Streaming(llm.StreamScript{
				Split: func(args string) []string {
					// One piece per call.
					var out []string
					for len(args) > len(tc.call)+1 {
						out = append(out, args[:len(tc.call)+1])
						args = args[len(tc.call)+1:]
					}
					return append(out, args)
				},
			})
			st := &streamTools{}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			env, err := streamPlanner(t, st, m, orchestrate.StreamAll, 1).Run(t.Context(), &orchestrate.Request{Prompt: "look up"})
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if env.Artifact.Success {
				t.Fatalf("a plan of %d calls ran", n)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
				t.Errorf("planning a streamed answer of %d calls allocated %d MiB; the work must grow with the answer, not its square", n, alloc>>20)
			}
			if got := len(st.list()); got > 12 {
				t.Errorf("%d calls started early, more than max_steps", got)
			}
		})
	}
}
