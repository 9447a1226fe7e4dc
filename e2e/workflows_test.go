package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// TestTSClientSavesAndCallsWorkflow: the TypeScript SDK clients run a
// prompt (the local OpenAI-compatible fake plans it) with save_as, see
// workflow__greet appear through notifications/tools/list_changed, call it
// with a new parameter and get the plan's return (validated by the SDK
// against the outputSchema), and the fake is asked nothing for that call;
// a parameter of the wrong type is refused with the schema's error.
func TestTSClientSavesAndCallsWorkflow(t *testing.T) {
	node, dir := tsClients(t)
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Call(planner.ToolName, `{"type":"tool_calls","schedule":"sequential","reasoning":"render it","answer":null,
			"calls":[{"tool_name":"render","arguments":{"template":"hello {{.who}}","values":{"who":"ana"}}}],
			"return":{"greeting":"$0.output.text"}}`)
	})
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte(`planner: {provider: openai, model: fake, base_url: "`+fake.URL()+`", max_retries: -1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(tmp, "spec.json")
	if err := os.WriteFile(spec, []byte(`{"prompt": "greet ana", "name": "greet", "args": {"template": "bye {{.who}}"}, "bad": {"template": 42}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	command, _ := json.Marshal([]string{orchestraBin, "serve", "--config", cfg, "--store", "memory"})
	for _, c := range stdioClients {
		t.Run(c.sdk+"/"+c.version, func(t *testing.T) {
			asked := len(fake.Requests())
			var r struct {
				Structured  map[string]any `json:"structured"`
				InputSchema map[string]any `json:"inputSchema"`
				Bad         string         `json:"bad"`
			}
			runClientMJS(t, node, dir, c, string(command), "workflow:"+spec, &r)
			if r.Structured["greeting"] != "bye ana" {
				t.Errorf("workflow__greet returned %v; want greeting \"bye ana\"", r.Structured)
			}
			if props, _ := r.InputSchema["properties"].(map[string]any); props["template"] == nil {
				t.Errorf("inputSchema = %v; want the template parameter", r.InputSchema)
			}
			if !strings.Contains(r.Bad, "template") || strings.HasPrefix(r.Bad, "accepted") {
				t.Errorf("a template of the wrong type: %q; want the schema's error", r.Bad)
			}
			// One model call planned the prompt; the workflow's calls made none.
			if n := len(fake.Requests()) - asked; n != 1 {
				t.Errorf("the model was asked %d times; want once, for the prompt", n)
			}
		})
	}
}
