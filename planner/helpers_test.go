package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

func schema(t testing.TB, doc string) *jsonschema.Schema {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("schema %s: %v", doc, err)
	}
	return &s
}

// calls records the tool calls of a test catalog.
type calls struct {
	mu    sync.Mutex
	names []string
	// plannerDisabled records, per call, whether the context had planner
	// tools disabled.
	plannerDisabled []bool
}

func (c *calls) record(ctx context.Context, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, name)
	c.plannerDisabled = append(c.plannerDisabled, toolcontext.PlannerDisabled(ctx))
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

// blogTools are the blog-writing example tools (research, then write a
// post from the research's artifact), with schemas strict modes can
// take, and a tool without an output schema.
func blogTools(t testing.TB, c *calls) []registry.Tool {
	structured := func(name string, out func(args map[string]any) any) registry.CallFunc {
		return func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			c.record(ctx, name)
			return &registry.Result{Structured: out(req.Arguments)}, nil
		}
	}
	return []registry.Tool{
		{
			Name:        "research_blog",
			Description: "Research a topic for a blog post.\nReturns an artifact with the title and the sources found.",
			InputSchema: schema(t, `{"type":"object","properties":{
				"topic":{"type":"string","description":"What to research.","minLength":1},
				"skill_id":{"type":"string"},
				"max_sources":{"type":"integer","minimum":1,"maximum":20,"description":"How many sources at most."}},
				"required":["topic"],"additionalProperties":false}`),
			OutputSchema: schema(t, `{"type":"object","properties":{
				"artifact_id":{"type":"string","description":"Unique identifier for the artifact."},
				"artifact":{"type":"object","properties":{
					"title":{"type":"string"},
					"sources":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string","format":"uri"},"title":{"type":"string"}}}}}},
				"_metadata":{"type":"object"}},
				"required":["artifact_id","artifact","_metadata"]}`),
			Call: structured("research_blog", func(args map[string]any) any {
				return map[string]any{"artifact_id": "abc-123", "artifact": map[string]any{"title": "AI Trends 2025: " + fmt.Sprint(args["topic"]), "sources": []any{map[string]any{"url": "https://example.com/a", "title": "A"}}}, "_metadata": map[string]any{}}
			}),
		},
		{
			Name:        "create_blog_post",
			Description: "Write a blog post from a research artifact.",
			InputSchema: schema(t, `{"type":"object","properties":{
				"artifact_id":{"type":"string","description":"Research artifact ID from research_blog."},
				"skill_id":{"type":"string"},
				"instructions":{"type":"string"},
				"tone":{"type":"string","enum":["formal","casual"]},
				"tags":{"type":"array","items":{"type":"string"}},
				"options":{"type":"object","properties":{"words":{"type":"integer"},"draft":{"type":"boolean"}},"required":["words"],"additionalProperties":false}},
				"required":["artifact_id","skill_id","instructions"],"additionalProperties":false}`),
			OutputSchema: schema(t, `{"type":"object","properties":{"post_id":{"type":"string"},"words":{"type":"integer"}},"required":["post_id","words"]}`),
			Call: structured("create_blog_post", func(args map[string]any) any {
				return map[string]any{"post_id": "post-" + fmt.Sprint(args["artifact_id"]), "words": 800}
			}),
		},
		{
			Name:        "fetch_page",
			Description: "Fetch a web page and return its text.",
			InputSchema: schema(t, `{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`),
			Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
				c.record(ctx, "fetch_page")
				return registry.TextResult("page text of " + fmt.Sprint(req.Arguments["url"])), nil
			},
		},
	}
}

// orchestrateTool stands for agent_orchestrate in a catalog: the planner
// must never offer it.
func orchestrateTool(t testing.TB) registry.Tool {
	return registry.Tool{Name: orchestrate.ToolName, Description: "Run plans.", InputSchema: schema(t, `{"type":"object"}`),
		Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) {
			return nil, fmt.Errorf("agent_orchestrate must never be called from a plan")
		}}
}

// fixture is a catalog, an engine over it and a planner.
type fixture struct {
	cat     *registry.Catalog
	engine  *orchestrate.Engine
	calls   *calls
	events  *events
	planner *planner.Planner
}

type events struct {
	mu   sync.Mutex
	list []string
}

// hooks records the lifecycle of runs: "run_started [planning]",
// "plan_ready", "run_finished <status>".
func (e *events) hooks() *orchestrate.Hooks {
	add := func(s string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.list = append(e.list, s)
	}
	return &orchestrate.Hooks{
		RunStarted: func(i orchestrate.RunStartedInfo) {
			if i.Planning {
				add("run_started planning")
			} else {
				add("run_started")
			}
		},
		PlanReady:   func(orchestrate.PlanReadyInfo) { add("plan_ready") },
		RunFinished: func(i orchestrate.RunFinishedInfo) { add("run_finished " + i.Envelope.Artifact.Status) },
	}
}

func (e *events) path() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

type fixtureOpts struct {
	builtins bool
	limits   orchestrate.Limits
	attempts int
	steps    int
}

func newFixture(t testing.TB, m llm.Model, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{calls: &calls{}, events: &events{}}
	tools := append(blogTools(t, f.calls), orchestrateTool(t))
	if o.builtins {
		var workers builtin.Workers
		t.Cleanup(func() { workers.Close() })
		tools = append(tools, builtin.Tools(builtin.DefaultConfig(), builtin.Options{Workers: &workers})...)
	}
	f.cat = registry.NewCatalog(tools...)
	forbidden := func(name string) bool { return name == orchestrate.ToolName }
	f.engine = orchestrate.NewEngine(orchestrate.Options{Tools: f.cat, Limits: o.limits, Forbidden: forbidden,
		Hooks: f.events.hooks()})
	f.planner = planner.New(planner.Options{Catalog: f.cat, Engine: f.engine, Model: m, Forbidden: forbidden, Attempts: o.attempts, MaxToolSteps: o.steps})
	return f
}

// planning returns a scripted response that calls __planning__ with args.
func planning(args string) llm.Response {
	return llm.Response{ToolCalls: []llm.ToolCall{{Name: planner.ToolName, Arguments: json.RawMessage(args)}},
		Usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}}
}

func text(s string) llm.Response {
	return llm.Response{Text: s, Usage: llm.Usage{InputTokens: 500, OutputTokens: 50}}
}

const validPlan = `{"type":"tool_calls","reasoning":"Research, then write.","calls":[
	{"tool_name":"research_blog","arguments":{"topic":"AI trends 2025"}},
	{"tool_name":"create_blog_post","arguments":{"artifact_id":"$0.output.artifact_id","skill_id":"blog_writing","instructions":"Write about ${0.output.artifact.title}"}}]}`

// invalidPlan references a field research_blog does not have.
const invalidPlan = `{"type":"tool_calls","reasoning":"Research, then write.","calls":[
	{"tool_name":"research_blog","arguments":{"topic":"AI trends 2025"}},
	{"tool_name":"create_blog_post","arguments":{"artifact_id":"$0.output.id","skill_id":"blog_writing","instructions":"Write"}}]}`

// userText joins the contents of a request's messages.
func userText(r llm.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	return b.String()
}

var _ = mcp.NewServer
