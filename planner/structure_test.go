package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
)

// drivenAPI is a local OpenAI-compatible server whose answers are driven by
// the request: answer gets each request's body and returns the JSON of the
// reply. Every body is recorded.
type drivenAPI struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newDrivenAPI(t *testing.T, answer func(body map[string]any) string) *drivenAPI {
	t.Helper()
	f := &drivenAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.mu.Unlock()
		if body["stream"] == true {
			streamed(w, r, jsonReply(200, answer(body)))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer(body))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *drivenAPI) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// offersPlanning reports whether a request offers the planning tool.
func offersPlanning(body map[string]any) bool {
	return get(body, "tools", 0, "function", "name") == planner.ToolName
}

// messagesText joins the contents of a request's messages.
func messagesText(body map[string]any) string {
	var b strings.Builder
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		fmt.Fprintln(&b, get(m, "content"))
	}
	return b.String()
}

func chatToolCall(name, args string) string {
	encoded, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_1","type":"function","function":{"name":%q,"arguments":%s}}]}}],
		"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`, name, encoded)
}

func chatText(text string) string {
	encoded, _ := json.Marshal(text)
	return fmt.Sprintf(`{"id":"c2","object":"chat.completion","created":1,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],
		"usage":{"prompt_tokens":50,"completion_tokens":5,"total_tokens":55}}`, encoded)
}

// pairs lets calls of one pair finish only when both run at the same time.
type pairs struct {
	mu    sync.Mutex
	ready map[string]chan struct{}
}

func (p *pairs) meet(ctx context.Context, pair string) error {
	p.mu.Lock()
	ch, waiting := p.ready[pair]
	if !waiting {
		ch = make(chan struct{})
		p.ready[pair] = ch
	} else {
		close(ch)
	}
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pair %s: the other call never ran at the same time: %w", pair, ctx.Err())
	}
}

// TestStructuredPlanRunsConcurrently: the planning schema and prompt sent to
// the model teach parallel groups, result keys, the dag schedule, on_error
// and retry, and a plan that uses them validates and runs concurrently:
// each call of the plan finishes only when its pair runs at the same time
// (a and b in a group; c and d, top-level calls that only the dag schedule
// starts together).
func TestStructuredPlanRunsConcurrently(t *testing.T) {
	const plan = `{"type":"tool_calls","reasoning":"a and b together, c and d together","schedule":"dag","content":null,"calls":[
		{"parallel":[
			{"tool_name":"meet","arguments":{"pair":"ab","who":"a"},"result_key":"a"},
			{"tool_name":"meet","arguments":{"pair":"ab","who":"b"},"result_key":"b"}],"result_key":null},
		{"tool_name":"meet","arguments":{"pair":"cd","who":"c"},"result_key":"c","on_error":null,"retry":{"max_attempts":2,"backoff_ms":null}},
		{"tool_name":"meet","arguments":{"pair":"cd","who":"d"},"result_key":"d","on_error":"halt","retry":null},
		{"tool_name":"join","arguments":{"parts":["$a.output.who","$b.output.who","$c.output.who","$d.output.who"]},"result_key":null,"on_error":null,"retry":null}]}`
	api := newDrivenAPI(t, func(body map[string]any) string {
		if offersPlanning(body) {
			return chatToolCall(planner.ToolName, plan)
		}
		return chatText("a, b, c and d met.")
	})
	p := &pairs{ready: map[string]chan struct{}{}}
	var joined []any
	tools := []registry.Tool{{
		Name: "meet", Description: "Meet the other call of a pair.",
		InputSchema:  schema(t, `{"type":"object","properties":{"pair":{"type":"string"},"who":{"type":"string"}},"required":["pair","who"],"additionalProperties":false}`),
		OutputSchema: schema(t, `{"type":"object","properties":{"who":{"type":"string"}},"required":["who"],"additionalProperties":false}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			if err := p.meet(ctx, fmt.Sprint(req.Arguments["pair"])); err != nil {
				return nil, err
			}
			return &registry.Result{Structured: map[string]any{"who": req.Arguments["who"]}}, nil
		},
	}, {
		Name: "join", Description: "Join parts.",
		InputSchema:  schema(t, `{"type":"object","properties":{"parts":{"type":"array","items":{"type":"string"}}},"required":["parts"],"additionalProperties":false}`),
		OutputSchema: schema(t, `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			joined = req.Arguments["parts"].([]any)
			return &registry.Result{Structured: map[string]any{"n": len(joined)}}, nil
		},
	}}
	cat := registry.NewCatalog(tools...)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
	pl := planner.New(planner.Options{Catalog: cat, Engine: e, Model: openAI(t, &fakeAPI{Server: api.Server}, llm.Config{})})
	env, err := pl.Ask(t.Context(), &orchestrate.Request{Prompt: "Have a meet b and c meet d, then join them.", TimeoutMS: 10000})
	if err != nil {
		t.Fatal(err)
	}
	a := env.Artifact
	if !a.Success || a.Plan.Schedule != orchestrate.ScheduleDAG || !a.Plan.Steps[0].IsGroup() || a.Response != "a, b, c and d met." {
		t.Fatalf("status %s, schedule %q, errors %v, validation %v", a.Status, a.Plan.Schedule, a.Errors, a.ValidationErrors)
	}
	if fmt.Sprint(joined) != "[a b c d]" {
		t.Errorf("join got %v", joined)
	}
	if r := a.Plan.Steps[1].Retry; r == nil || r.MaxAttempts != 2 {
		t.Errorf("the retry of c = %+v", r)
	}
	// What the model was taught.
	first := api.requests()[0]
	params, _ := json.Marshal(get(first, "tools", 0, "function", "parameters"))
	for _, want := range []string{`"parallel"`, `"schedule"`, `"dag"`, `"result_key"`, `"on_error"`, `"retry"`} {
		if !strings.Contains(string(params), want) {
			t.Errorf("the planning schema sent has no %s", want)
		}
	}
	if get(first, "tools", 0, "function", "strict") != true {
		t.Error("the planning schema sent is not the strict one")
	}
	system := fmt.Sprint(get(first, "messages", 0, "content"))
	for _, want := range []string{`{"parallel": [call, call]`, `"schedule": "dag"`, `"result_key"`, `"on_error": "continue"`, `"retry"`} {
		if !strings.Contains(system, want) {
			t.Errorf("the planner's prompt does not teach %s", want)
		}
	}
}

// TestContextReachesPlannerAndRespondCapped: the caller's context reaches the
// planning request and the RESPOND request, capped by the token budget: the
// oldest turns are dropped, and the drop is noted.
func TestContextReachesPlannerAndRespondCapped(t *testing.T) {
	api := newDrivenAPI(t, func(body map[string]any) string {
		if offersPlanning(body) {
			return chatToolCall(planner.ToolName, validPlan)
		}
		return chatText("done")
	})
	f := newFixture(t, openAI(t, &fakeAPI{Server: api.Server}, llm.Config{}), fixtureOpts{})
	f.planner = planner.New(planner.Options{Catalog: f.cat, Engine: f.engine, Model: f.planner.Model(), ContextTokens: 300})
	var history []orchestrate.Turn
	for i := range 40 {
		history = append(history, orchestrate.Turn{Role: "user", Content: fmt.Sprintf("turn %02d: %s", i, strings.Repeat("words ", 10))})
	}
	history[39].Content = "turn 39: the newest"
	req := &orchestrate.Request{Prompt: "Write the post we discussed", Context: &orchestrate.CallerContext{
		Instructions: "Answer in French.",
		History:      history,
		Facts:        map[string]any{"blog": "orchestra-news"},
	}}
	if _, err := f.planner.Ask(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, name := range []string{"planning", "RESPOND"} {
		text := messagesText(reqs[i])
		for _, want := range []string{"Answer in French.", `blog: "orchestra-news"`, "turn 39: the newest", "earlier turns dropped to stay within 300 tokens"} {
			if !strings.Contains(text, want) {
				t.Errorf("the %s request lacks %q", name, want)
			}
		}
		if strings.Contains(text, "turn 00") {
			t.Errorf("the %s request carries the oldest turn: the context is not capped", name)
		}
		user := fmt.Sprint(get(reqs[i], "messages", 1, "content"))
		if ctxText := user[strings.Index(user, "Instructions from the caller"):]; i == 0 && planner.EstimateTokens(ctxText) > 300 {
			t.Errorf("the context in the planning request is %d tokens, over its budget of 300", planner.EstimateTokens(ctxText))
		}
	}
}

// TestConfiguredFallbackRunsReactive: with the fallback configured (not
// asked for by the request), a plan the model cannot make valid turns
// into a reactive run, and the envelope says which path ran.
func TestConfiguredFallbackRunsReactive(t *testing.T) {
	api := newDrivenAPI(t, func(body map[string]any) string {
		if offersPlanning(body) {
			return chatToolCall(planner.ToolName, invalidPlan)
		}
		if strings.Contains(messagesText(body), "abc-123") {
			return chatText("Researched: abc-123.")
		}
		return chatToolCall("research_blog", `{"topic":"AI"}`)
	})
	f := newFixture(t, openAI(t, &fakeAPI{Server: api.Server}, llm.Config{}), fixtureOpts{})
	for _, fallback := range []string{"", planner.FallbackReactive} {
		pl := planner.New(planner.Options{Catalog: f.cat, Engine: f.engine, Model: f.planner.Model(), Fallback: fallback})
		env, err := pl.Ask(t.Context(), &orchestrate.Request{Prompt: "research AI"})
		if err != nil {
			t.Fatal(err)
		}
		a := env.Artifact
		switch fallback {
		case "":
			if a.Success || a.Planner.Fallback != "" {
				t.Errorf("without a fallback: status %s, planner %+v", a.Status, a.Planner)
			}
		default:
			if !a.Success || a.Planner.Fallback != planner.FallbackReactive || a.Response != "Researched: abc-123." {
				t.Errorf("with fallback reactive: status %s, planner %+v, response %q, errors %v", a.Status, a.Planner, a.Response, a.Errors)
			}
		}
	}
	// The request's own fallback wins.
	pl := planner.New(planner.Options{Catalog: f.cat, Engine: f.engine, Model: f.planner.Model(), Fallback: planner.FallbackReactive})
	env, _ := pl.Run(t.Context(), &orchestrate.Request{Prompt: "research AI", Fallback: "none"})
	if env.Artifact.Planner.Fallback != "" {
		t.Errorf("fallback none in the request still ran %q", env.Artifact.Planner.Fallback)
	}
}

// memLessons keeps lessons in memory, per caller.
type memLessons struct {
	mu      sync.Mutex
	lessons []planner.Lesson
}

func (m *memLessons) Recall(_ context.Context, tools []string, n int) []planner.Lesson {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []planner.Lesson
	for _, l := range m.lessons {
		for _, t := range tools {
			if l.Tool == t && len(out) < n {
				out = append(out, l)
			}
		}
	}
	return out
}

func (m *memLessons) Learn(_ context.Context, ls []planner.Lesson) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lessons = append(m.lessons, ls...)
}

// TestRepairLessonsReachTheNextPrompt: a repair that worked is kept as a
// lesson (what was wrong, what fixed it) of the tool concerned, and the next
// planning request offering that tool shows it.
func TestRepairLessonsReachTheNextPrompt(t *testing.T) {
	var mu sync.Mutex
	n := 0
	api := newDrivenAPI(t, func(body map[string]any) string {
		if !offersPlanning(body) {
			return chatText("done")
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return chatToolCall(planner.ToolName, invalidPlan)
		}
		return chatToolCall(planner.ToolName, validPlan)
	})
	f := newFixture(t, openAI(t, &fakeAPI{Server: api.Server}, llm.Config{}), fixtureOpts{})
	mem := &memLessons{}
	pl := planner.New(planner.Options{Catalog: f.cat, Engine: f.engine, Model: f.planner.Model(), Lessons: mem})
	for range 2 {
		if _, err := pl.Plan(t.Context(), &orchestrate.Request{Prompt: "blog"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(mem.lessons) != 1 || mem.lessons[0].Tool != "create_blog_post" || mem.lessons[0].Kind != planner.LessonRepair ||
		!strings.Contains(mem.lessons[0].Text, `was "$0.output.id"; write artifact_id: "$0.output.artifact_id"`) {
		t.Fatalf("lessons = %+v", mem.lessons)
	}
	reqs := api.requests()
	last := messagesText(reqs[len(reqs)-1])
	if !strings.Contains(last, "Lessons from earlier runs") || !strings.Contains(last, "create_blog_post: ") || !strings.Contains(last, "$0.output.artifact_id") {
		t.Errorf("the next planning request does not show the lesson:\n%s", last)
	}
	if strings.Contains(messagesText(reqs[0]), "Lessons from earlier runs") {
		t.Error("the first planning request shows lessons it could not have")
	}
}
