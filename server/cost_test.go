package server_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// costRun runs, for tenant a's caller, a prompt whose plan asks the agent
// helper, whose loop calls a_probe once and answers: the planner's call
// uses 1000 input and 200 output tokens of planner-model, the agent's two
// turns 300+400 and 50+60 of agent-model. It returns the app, the
// envelope and the metrics.
func costRun(t *testing.T, pricing llm.Prices) (*server.App, *orchestrate.Envelope, string) {
	t.Helper()
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		switch {
		case isPlanning(r):
			rep := fakeopenai.Call("__planning__", planAgentStep)
			rep.InputTokens, rep.OutputTokens = 1000, 200
			return rep
		case len(r.ToolResults()) == 0:
			rep := fakeopenai.Call("a_probe", `{"label": "x"}`)
			rep.InputTokens, rep.OutputTokens = 300, 50
			return rep
		}
		return fakeopenai.Reply{Text: "done", InputTokens: 400, OutputTokens: 60}
	})
	cfg := profileConfig(t, fake)
	cfg.Pricing = pricing
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Helps.", Tools: []string{"a_probe"},
		Model: &llm.Config{Provider: llm.ProviderOpenAI, Model: "agent-model", BaseURL: fake.URL(), MaxRetries: -1}}}
	app, err := server.New(t.Context(), cfg, server.Options{Version: "test", Metrics: true, Tools: []registry.Tool{(&probe{}).tool(t, "a_probe")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	res, env := runPlan(t, connectAs(t, srv, "alice-secret-token"), map[string]any{"prompt": "do it", "response": "full"})
	if res.IsError {
		t.Fatalf("status %s: %v %v", env.Artifact.Status, env.Artifact.Errors, env.Artifact.ValidationErrors)
	}
	w := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	return app, env, string(body)
}

// agentMetadata returns the metadata of the run's agent step.
func agentMetadata(t *testing.T, env *orchestrate.Envelope) map[string]any {
	t.Helper()
	for _, st := range env.Artifact.Steps {
		if st.Type == "agent" {
			data, _ := json.Marshal(st.Output)
			var out struct {
				Metadata map[string]any `json:"metadata"`
			}
			json.Unmarshal(data, &out)
			return out.Metadata
		}
	}
	t.Fatal("no agent step in the envelope")
	return nil
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// TestCost: with pricing configured, the planner's and the agent's costs
// are the hand-computed figures, in artifact.planner, the agent's
// metadata, artifact.agents, the run's record and orchestra executions'
// summary, and the Prometheus counter by tenant and model.
func TestCost(t *testing.T) {
	pricing := llm.Prices{"planner-model": {Input: 2.5, Output: 10}, "agent-model": {Input: 0.15, Output: 0.6}}
	const (
		plannerCost = (1000*2.5 + 200*10) / 1e6            // 0.0045
		agentCost   = ((300+400)*0.15 + (50+60)*0.6) / 1e6 // 0.000171
	)
	app, env, metrics := costRun(t, pricing)
	a := env.Artifact
	if a.Planner == nil || a.Planner.CostUSD == nil || !near(*a.Planner.CostUSD, plannerCost) {
		t.Errorf("artifact.planner %+v, want cost_usd %v", a.Planner, plannerCost)
	}
	if c, ok := agentMetadata(t, env)["cost_usd"].(float64); !ok || !near(c, agentCost) {
		t.Errorf("the agent's metadata.cost_usd is %v, want %v", agentMetadata(t, env)["cost_usd"], agentCost)
	}
	if a.Agents == nil || a.Agents.CostUSD == nil || !near(*a.Agents.CostUSD, agentCost) {
		t.Errorf("artifact.agents %+v, want cost_usd %v", a.Agents, agentCost)
	}
	run, _, err := app.Store().Get(t.Context(), env.Metadata.ExecID)
	if err != nil {
		t.Fatal(err)
	}
	if run.CostUSD == nil || !near(*run.CostUSD, plannerCost+agentCost) {
		t.Errorf("the run's record costs %v, want %v", run.CostUSD, plannerCost+agentCost)
	}
	if s := server.Summary(run); s.CostUSD == nil || !near(*s.CostUSD, plannerCost+agentCost) {
		t.Errorf("the run's summary costs %v", s.CostUSD)
	}
	got := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^orchestra_cost_USD_total\{([^}]*)\} (\S+)$`).FindAllStringSubmatch(metrics, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		model := regexp.MustCompile(`gen_ai_request_model="([^"]*)"`).FindStringSubmatch(m[1])
		tenant := regexp.MustCompile(`orchestra_tenant="([^"]*)"`).FindStringSubmatch(m[1])
		if model != nil && tenant != nil {
			got[tenant[1]+"/"+model[1]] += v
		}
	}
	if !near(got["a/openai:planner-model"], plannerCost) || !near(got["a/openai:agent-model"], agentCost) || len(got) != 2 {
		t.Errorf("the cost counter by tenant/model is %v, want a/openai:planner-model %v and a/openai:agent-model %v\n%s", got, plannerCost, agentCost, metrics)
	}
}

// TestNoPricingNoCost: without pricing (or without the price of a model
// that was called) no cost is shown anywhere: no 0 standing for unknown.
func TestNoPricingNoCost(t *testing.T) {
	for name, pricing := range map[string]llm.Prices{
		"none":          nil,
		"agent unknown": {"planner-model": {Input: 2.5, Output: 10}},
	} {
		t.Run(name, func(t *testing.T) {
			app, env, metrics := costRun(t, pricing)
			a := env.Artifact
			if c, ok := agentMetadata(t, env)["cost_usd"]; ok {
				t.Errorf("the agent's metadata has cost_usd %v", c)
			}
			if a.Agents == nil || a.Agents.CostUSD != nil {
				t.Errorf("artifact.agents %+v, want no cost_usd", a.Agents)
			}
			if pricing == nil && a.Planner.CostUSD != nil {
				t.Errorf("artifact.planner has cost_usd %v without pricing", *a.Planner.CostUSD)
			}
			run, _, err := app.Store().Get(t.Context(), env.Metadata.ExecID)
			if err != nil {
				t.Fatal(err)
			}
			if run.CostUSD != nil {
				t.Errorf("the record costs %v, want none", *run.CostUSD)
			}
			if regexp.MustCompile(`orchestra_cost_USD_total\{[^}]*agent-model`).MatchString(metrics) {
				t.Errorf("the cost counter has an unpriced model:\n%s", metrics)
			}
		})
	}
}
