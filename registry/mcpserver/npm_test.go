package mcpserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry"
)

// npmDir holds the third-party servers, installed with `npm ci` there.
const npmDir = "../../testdata/npm"

// npmServer returns the config that runs the installed server bin with node.
func npmServer(t *testing.T, pkg string, args ...string) ServerConfig {
	t.Helper()
	root, err := filepath.Abs(npmDir)
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	// CI installs the servers and sets ORCHESTRA_REQUIRE_NPM, so a broken
	// install fails there instead of skipping.
	skip := t.Skipf
	if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
		skip = t.Fatalf
	}
	if _, err := os.Stat(entry); err != nil {
		skip("the npm test servers are not installed (run `npm ci` in testdata/npm): %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed")
	}
	return ServerConfig{Command: node, Args: append([]string{entry}, args...)}
}

func TestThirdPartyServers(t *testing.T) {
	checkGoroutines(t)
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("alpha\nfirst file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "b.txt"), []byte("beta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	memory := npmServer(t, "server-memory")
	memory.Env = map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
	env := startManager(t, map[string]ServerConfig{
		"fs":     npmServer(t, "server-filesystem", files),
		"memory": memory,
	}, Options{})
	for _, st := range env.m.Status() {
		if st.State != StateConnected || len(st.Tools) == 0 {
			t.Fatalf("%s: %+v", st.Name, st)
		}
		t.Logf("%s: %d tools over %s, protocol %s", st.Name, len(st.Tools), st.Transport, st.ProtocolVersion)
	}

	t.Run("schemas", func(t *testing.T) {
		withOutput := 0
		for _, tool := range env.cat.List() {
			if tool.SchemaProblem != "" {
				t.Errorf("%s: %s", tool.Name, tool.SchemaProblem)
			}
			if _, err := tool.InputSchema.Resolve(nil); err != nil {
				t.Errorf("%s: input schema: %v", tool.Name, err)
			}
			if tool.OutputSchema != nil {
				withOutput++
				if _, err := tool.OutputSchema.Resolve(nil); err != nil {
					t.Errorf("%s: output schema: %v", tool.Name, err)
				}
			}
		}
		if withOutput == 0 {
			t.Error("no tool has an output schema; the real servers declare them")
		}
		// A template into the read graph reaches entities[].name.
		graph := env.tool(t, "memory__read_graph").OutputSchema
		if graph == nil || graph.Properties["entities"] == nil {
			t.Fatalf("memory__read_graph output schema = %v, want entities", graph)
		}
		if env.tool(t, "fs__read_text_file").InputSchema.Properties["path"] == nil {
			t.Error("fs__read_text_file has no path argument")
		}
	})

	call := func(t *testing.T, name string, args map[string]any) *registry.Result {
		t.Helper()
		tool := env.tool(t, name)
		res, err := tool.Invoke(t.Context(), &registry.CallRequest{Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			t.Fatalf("%s: tool error: %s", name, res.Text())
		}
		if tool.OutputSchema != nil {
			rs, _ := tool.OutputSchema.Resolve(nil)
			if err := rs.Validate(res.Structured); err != nil {
				t.Errorf("%s: result does not match the normalized output schema: %v", name, err)
			}
		}
		return res
	}

	t.Run("filesystem", func(t *testing.T) {
		res := call(t, "fs__read_text_file", map[string]any{"path": filepath.Join(files, "a.txt")})
		out, _ := res.Output().(map[string]any)
		if content, _ := out["content"].(string); !strings.Contains(content, "first file") {
			t.Errorf("read_text_file output = %v", res.Output())
		}
		res = call(t, "fs__list_directory", map[string]any{"path": files})
		if !strings.Contains(res.Text(), "a.txt") || !strings.Contains(res.Text(), "b.txt") {
			t.Errorf("list_directory = %q", res.Text())
		}
		// Outside the allowed directory: a tool error, not a broken server.
		tool := env.tool(t, "fs__read_text_file")
		res, err := tool.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"path": "/etc/hostname"}})
		if err != nil || !res.IsError {
			t.Errorf("reading outside the root: %v, %+v; want a tool error", err, res)
		}
	})

	t.Run("memory", func(t *testing.T) {
		call(t, "memory__create_entities", map[string]any{"entities": []any{
			map[string]any{"name": "alpha", "entityType": "file", "observations": []any{"first file"}},
			map[string]any{"name": "beta", "entityType": "file", "observations": []any{}},
		}})
		call(t, "memory__create_relations", map[string]any{"relations": []any{
			map[string]any{"from": "alpha", "to": "beta", "relationType": "precedes"},
		}})
		res := call(t, "memory__read_graph", nil)
		graph, _ := res.Structured.(map[string]any)
		entities, _ := graph["entities"].([]any)
		relations, _ := graph["relations"].([]any)
		if len(entities) != 2 || len(relations) != 1 {
			t.Fatalf("read_graph = %v", res.Structured)
		}
		res = call(t, "memory__search_nodes", map[string]any{"query": "first"})
		found, _ := res.Structured.(map[string]any)["entities"].([]any)
		if len(found) != 1 || found[0].(map[string]any)["name"] != "alpha" {
			t.Errorf("search_nodes = %v", res.Structured)
		}
	})
}
