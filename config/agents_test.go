package config_test

import (
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
)

// The agents block parses with free-form schemas in it, and its problems
// are reported with where they are.
func TestAgentsBlock(t *testing.T) {
	c, err := config.Parse([]byte(`
agents:
  researcher:
    description: Finds things.
    instructions: You research.
    tools: ["fs__read_*", json_query]
    max_tool_steps: 4
    output_schema: {type: object, properties: {sources: {type: array, items: {type: string}}}}
    actions:
      search: {description: Searches., prompt: "Search {{.q}}", input_schema: {type: object}}
    expose: true
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agents["researcher"]
	if a.MaxToolSteps != 4 || !a.Expose || len(a.Tools) != 2 || a.Actions["search"].Prompt != "Search {{.q}}" || a.OutputSchema["type"] != "object" {
		t.Errorf("agent = %+v", a)
	}
	_, err = config.Parse([]byte(`
agents:
  bad:
    tools: ["["]
    model: {provider: openai}
    actions: {x: {prompt: "{{.q"}}
    instuctions: typo
`), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("a bad agents block parsed")
	}
	for _, want := range []string{"instuctions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = config.Parse([]byte(`
agents:
  bad:
    tools: ["["]
    model: {provider: openai}
    actions: {x: {prompt: "{{.q"}}
`), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("a bad agents block parsed")
	}
	for _, want := range []string{"agents.bad.description is required", `agents.bad.tools: "[" is not a valid glob`, "agents.bad.model: model is required", "agents.bad.actions.x.prompt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
