package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/orchestra-mcp/orchestra/fsm"
	"github.com/orchestra-mcp/orchestra/registry"
)

// fakeTool builds a tool from a function and schemas written as JSON.
func fakeTool(t testing.TB, name, in, out string, call func(ctx context.Context, args map[string]any) (*registry.Result, error)) registry.Tool {
	t.Helper()
	tool := registry.Tool{Name: name, Description: "test tool " + name, Source: "test"}
	if in == "" {
		in = `{"type":"object"}`
	}
	tool.InputSchema = mustSchema(t, in)
	if out != "" {
		tool.OutputSchema = mustSchema(t, out)
	}
	tool.Call = func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
		return call(ctx, req.Arguments)
	}
	return tool
}

func mustSchema(t testing.TB, s string) *jsonschema.Schema {
	t.Helper()
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return &sc
}

func structured(v any) *registry.Result { return &registry.Result{Structured: v} }

// callLog records tool calls.
type callLog struct {
	mu    sync.Mutex
	calls []string
	args  map[string][]map[string]any
}

func (l *callLog) add(name string, args map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, name)
	if l.args == nil {
		l.args = map[string][]map[string]any{}
	}
	l.args[name] = append(l.args[name], args)
}

func (l *callLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func mustRequest(t testing.TB, js string) *Request {
	t.Helper()
	req, issues := DecodeRequest([]byte(js))
	if len(issues) > 0 {
		data, _ := json.MarshalIndent(issues, "", "  ")
		t.Fatalf("decoding %s:\n%s", js, data)
	}
	return req
}

// pathRecorder collects the state machine's transitions of runs and the
// hooks they call.
type pathRecorder struct {
	mu    sync.Mutex
	all   []fsm.Transition
	hooks []string // "run_started", "step_ended <path> <status>", ...
}

func (p *pathRecorder) transition(t fsm.Transition) {
	p.mu.Lock()
	p.all = append(p.all, t)
	p.mu.Unlock()
}

func (p *pathRecorder) saw(what string) {
	p.mu.Lock()
	p.hooks = append(p.hooks, what)
	p.mu.Unlock()
}

// lifecycle returns the hooks of the recorder; a run whose engine reports
// an internal error (an event the state machine refused, a hook that
// panicked) fails t.
func (p *pathRecorder) lifecycle(t testing.TB) *Hooks {
	return &Hooks{
		RunStarted: func(RunStartedInfo) { p.saw("run_started") },
		PlanReady:  func(PlanReadyInfo) { p.saw("plan_ready") },
		StepStarted: func(i StepStartedInfo) {
			p.saw("step_started " + i.Step.Path)
		},
		StepEnded: func(i StepEndedInfo) {
			p.saw("step_ended " + i.Step.Path + " " + i.Step.Status)
		},
		RunFinished: func(i RunFinishedInfo) {
			if i.Err != nil {
				t.Errorf("the engine failed inside: %v", i.Err)
			}
			p.saw("run_finished")
		},
		RunPaused:  func(RunPausedInfo) { p.saw("run_paused") },
		RunResumed: func(RunResumedInfo) { p.saw("run_resumed") },
	}
}

// path returns the state-changing transitions.
func (p *pathRecorder) path() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, t := range p.all {
		if t.From == t.To {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", t.Event, t.From, t.To))
	}
	return out
}

// checkLifecycle checks the hooks a run called against its envelope:
// RunStarted first and RunFinished last, once each; PlanReady at most once,
// before any step starts; every step and group of the envelope, at every
// depth, ended exactly once with the status the envelope has, after it
// started if it did, and after its children; nothing else ended.
func checkLifecycle(t testing.TB, env *Envelope, calls []string) {
	t.Helper()
	if len(calls) < 2 || calls[0] != "run_started" || calls[len(calls)-1] != "run_finished" && calls[len(calls)-1] != "run_paused" {
		t.Fatalf("hooks %v: want run_started first and run_finished (or run_paused) last", calls)
	}
	paused := calls[len(calls)-1] == "run_paused"
	at := map[string]int{} // position of each call
	for i, c := range calls {
		if _, dup := at[c]; dup {
			t.Errorf("hook %q called twice", c)
		}
		at[c] = i
	}
	if i, ok := at["plan_ready"]; ok {
		for c, j := range at {
			if strings.HasPrefix(c, "step_started ") && j < i {
				t.Errorf("%s before plan_ready", c)
			}
		}
	}
	ended := 0
	var walk func(rs []*StepRecord) int
	walk = func(rs []*StepRecord) (last int) {
		for _, rec := range rs {
			if paused && (rec.Status == StatusAwaitingClient || rec.Status == StatusPending) {
				walk(rec.Children) // it has not ended; what in it did has
				continue
			}
			end, ok := at["step_ended "+rec.Path+" "+rec.Status]
			if !ok {
				t.Errorf("step %s (%s) never ended in the hooks %v", rec.Path, rec.Status, calls)
				continue
			}
			ended++
			start, started := at["step_started "+rec.Path]
			if started != (rec.StartedAt != nil) {
				t.Errorf("step %s: step_started called %v, started_at %v", rec.Path, started, rec.StartedAt)
			}
			if started && start > end {
				t.Errorf("step %s ended before it started", rec.Path)
			}
			if c := walk(rec.Children); c > end {
				t.Errorf("group %s ended before its children", rec.Path)
			}
			last = max(last, end)
		}
		return last
	}
	walk(env.Artifact.Steps)
	all := 0
	for c := range at {
		if strings.HasPrefix(c, "step_ended ") {
			all++
		}
	}
	if all != ended {
		t.Errorf("%d steps ended in the hooks, %d in the envelope: %v", all, ended, calls)
	}
}

// calls returns the hooks called so far, in order.
func (p *pathRecorder) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.hooks...)
}

// errorLog records the engine's error logs; a "state machine" error means
// the executor fired an event its state does not allow.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "event" || a.Key == "state" || a.Key == "err" {
			msg += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		}
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

// checkFSM fails t when the engine fired an event its state did not allow.
func (l *errorLog) checkFSM(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.HasPrefix(m, "state machine") {
			t.Errorf("the executor fired an event the transition table does not allow: %s", m)
		}
	}
}

func counterIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("id-%d", n)
	}
}

// testEngine is an engine over a catalog that records its path and logs.
type testEngine struct {
	*Engine
	rec  *pathRecorder
	logs *errorLog
}

func newTestEngine(t testing.TB, tools Tools, lim Limits, hooks ...*Hooks) *testEngine {
	rec := &pathRecorder{}
	logs := &errorLog{}
	e := NewEngine(Options{
		Tools:     tools,
		Limits:    lim,
		Forbidden: func(name string) bool { return name == "agent_orchestrate" },
		Logger:    slog.New(logs),
		Hooks:     ComposeHooks(append([]*Hooks{rec.lifecycle(t)}, hooks...)...),
		NewID:     counterIDs(),
	})
	e.transition = rec.transition
	return &testEngine{e, rec, logs}
}
