package server_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// What a client pays for orchestra's definitions and responses, in
// characters: every tool listed is sent to the client's model with every
// request, and every response is read by it.
const (
	// definitionBudget caps agent_orchestrate's description, input schema
	// and output schema together, as JSON without spaces. 3,000 until the
	// output schema declared _metadata's fields (the standard envelope's
	// tool_name and executed_at among them, required): 376 characters,
	// of which writing the input schema's steps out without a recursive
	// $defs.step and dropping its top-level oneOf gave back 186. Background
	// runs' three input fields and the description's line cost 151 more
	// (the running answer itself says how to await and cancel).
	definitionBudget = 3350
	// unexposedListBudget caps the whole tools/list of a server with the
	// filesystem and everything servers and expose_downstream: false.
	// 4,000 until background runs' fields and line (151, as above).
	unexposedListBudget = 4150
	// quickstartTextBudget caps the text content of the quick start's
	// compact response.
	quickstartTextBudget = 600
)

func compactJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDefinitionBudget: agent_orchestrate's definition, as `serve` lists
// it with no configuration, stays within definitionBudget characters. A
// feature taught in the description or the schemas must fit in what is
// left.
func TestDefinitionBudget(t *testing.T) {
	_, tools := listedTools(t)
	for _, tool := range tools {
		if tool.Name != "agent_orchestrate" {
			continue
		}
		desc := utf8.RuneCountInString(tool.Description)
		in := utf8.RuneCountInString(compactJSON(t, tool.InputSchema))
		out := utf8.RuneCountInString(compactJSON(t, tool.OutputSchema))
		whole := utf8.RuneCountInString(compactJSON(t, tool))
		t.Logf("agent_orchestrate: description %d + input schema %d + output schema %d = %d characters (budget %d); %d with name, title and annotations",
			desc, in, out, desc+in+out, definitionBudget, whole)
		if desc+in+out > definitionBudget {
			t.Errorf("agent_orchestrate's definition is %d characters; the budget is %d", desc+in+out, definitionBudget)
		}
		for _, must := range []string{"$0.output", "${", "$bindings.", "parallel", `"answer"`, `"return"`, `"response": "full"`, "Example"} {
			if !strings.Contains(tool.Description, must) {
				t.Errorf("the description no longer teaches %s", must)
			}
		}
		return
	}
	t.Fatal("agent_orchestrate is not listed")
}

// TestToolsListWithoutDownstream: with the filesystem and everything
// servers configured and expose_downstream: false, tools/list holds only
// agent_orchestrate and orchestra_tools within unexposedListBudget
// characters, and orchestra_tools describes the tools plans can call.
func TestToolsListWithoutDownstream(t *testing.T) {
	off := false
	_, cs := downstreamAppWith(t, map[string]mcpserver.ServerConfig{
		"fs": npmServer(t, "server-filesystem", t.TempDir()),
		"ev": npmServer(t, "server-everything"),
	}, nil, func(cfg *config.Config) { cfg.Server.ExposeDownstream = &off })
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		t.Logf("%s: %d characters", tool.Name, utf8.RuneCountInString(compactJSON(t, tool)))
	}
	if strings.Join(names, ",") != "agent_orchestrate,orchestra_tools" {
		t.Errorf("tools/list shows %v; want agent_orchestrate and orchestra_tools", names)
	}
	size := utf8.RuneCountInString(compactJSON(t, res.Tools))
	t.Logf("tools/list: %d characters (budget %d)", size, unexposedListBudget)
	if size > unexposedListBudget {
		t.Errorf("tools/list is %d characters; the budget is %d", size, unexposedListBudget)
	}

	// The unlisted tools are still callable from plans, and described on
	// request.
	call := func(args map[string]any) map[string]any {
		r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "orchestra_tools", Arguments: args})
		if err != nil || r.IsError {
			t.Fatalf("orchestra_tools %v: %v %s", args, err, servertest.Text(r))
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(servertest.Text(r)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	byQuery := call(map[string]any{"query": "read the text of a file"})
	first := byQuery["tools"].([]any)[0].(map[string]any)
	if !strings.HasPrefix(first["name"].(string), "fs__read") || first["input_schema"] == nil {
		t.Errorf("the query's best tool is %v", first["name"])
	}
	byName := call(map[string]any{"names": []any{"ev__echo"}})
	if tools := byName["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["name"] != "ev__echo" {
		t.Errorf("by name: %v", tools)
	}
	if others := byName["others"].([]any); len(others) < 10 {
		t.Errorf("only %d other tools named", len(others))
	}
	r, env := servertest.Call(t, cs, plan(map[string]any{"id": "e", "tool": "ev__echo", "arguments": map[string]any{"message": "hi"}}), nil)
	if r.IsError {
		t.Fatalf("a plan cannot call an unlisted tool: %s", servertest.Text(r))
	}
	if env.Artifact.Steps[0].Status != "success" {
		t.Errorf("echo: %+v", env.Artifact.Steps[0])
	}
}

// TestQuickstartResponse: the quick start's plan over MCP answers in at
// most quickstartTextBudget bytes of text when compact (the default), and
// with the whole envelope, twice, when "full".
func TestQuickstartResponse(t *testing.T) {
	data, err := os.ReadFile("../examples/quickstart.json")
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal(data, &args); err != nil {
		t.Fatal(err)
	}
	cs, _ := listedTools(t)
	compact, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
	if err != nil || compact.IsError {
		t.Fatalf("quick start: %v %s", err, servertest.Text(compact))
	}
	text := servertest.Text(compact)
	t.Logf("compact: %d bytes of text content, %d of structured content", len(text), len(compactJSON(t, compact.StructuredContent)))
	if len(compact.Content) != 1 || len(text) > quickstartTextBudget {
		t.Errorf("the compact response has %d blocks and %d bytes of text; want 1 block within %d bytes:\n%s", len(compact.Content), len(text), quickstartTextBudget, text)
	}
	if !strings.Contains(text, "Revenue for the sales team: 236.5") {
		t.Errorf("the compact text lacks the report:\n%s", text)
	}
	args["response"] = "full"
	full, _ := servertest.Call(t, cs, args, nil)
	t.Logf("full: %d bytes of text content", len(servertest.Text(full)))
	var env map[string]any
	_ = json.Unmarshal([]byte(compactJSON(t, full.StructuredContent)), &env)
	art := env["artifact"].(map[string]any)
	if len(full.Content) != 2 || art["plan"] == nil || art["steps"].([]any)[0].(map[string]any)["arguments"] == nil {
		t.Errorf("the full response is not the whole envelope with its JSON block")
	}
}
