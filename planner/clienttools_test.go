package planner_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// The planner offers the request's client tools, and the plan it writes
// with one validates and pauses there.
func TestPlannerOffersClientTools(t *testing.T) {
	plan := `{"type":"tool_calls","reasoning":"Research, then let the IDE edit.","calls":[
		{"tool_name":"research_blog","arguments":{"topic":"AI"}},
		{"tool_name":"ide_edit","arguments":{"text":"${0.output.artifact.title}"}}]}`
	m := llm.NewScripted([]llm.Response{planning(plan)})
	f := newFixture(t, m, fixtureOpts{})
	req, issues := orchestrate.DecodeRequest([]byte(`{"prompt": "research AI and put the title in my editor",
		"client_tools": [{"name": "ide_edit", "description": "Edits the open file.", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}`))
	if len(issues) > 0 {
		t.Fatal(issues[0])
	}
	env, err := f.planner.Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if env.Artifact.Status != orchestrate.StatusAwaitingClient || env.Artifact.Pending[0].Tool != "ide_edit" {
		t.Fatalf("%s", env.JSON())
	}
	reqs := m.Requests()
	if len(reqs) != 1 || !strings.Contains(string(mustJSON(t, reqs[0].Tools)), "ide_edit") {
		t.Errorf("the planner was not offered ide_edit")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
