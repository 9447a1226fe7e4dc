package planner_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenCatalogs are the fixed catalogs whose planning tools are snapshot.
func goldenCatalogs(t *testing.T) map[string][]registry.Tool {
	return map[string][]registry.Tool{
		// The blog-writing example tools: every schema can be made strict.
		"blog": append(blogTools(t, &calls{}), orchestrateTool(t)),
		// With the built-in tools, whose free-form arguments (jq vars,
		// template values) strict modes cannot express.
		"builtin": append(blogTools(t, &calls{}), builtin.Tools(builtin.DefaultConfig(), builtin.Options{})...),
	}
}

func TestGolden(t *testing.T) {
	for name, tools := range goldenCatalogs(t) {
		t.Run(name, func(t *testing.T) {
			tool := planner.Build(1, tools, planner.BuildOptions{MaxSteps: 12, Forbidden: func(n string) bool { return n == orchestrate.ToolName }})
			golden(t, name+".strict.json", jsonText(t, tool.Strict))
			golden(t, name+".loose.json", jsonText(t, tool.Loose))
			golden(t, name+".prompt.txt", tool.Prompt)
			golden(t, name+".strict-problems.txt", strings.Join(tool.StrictProblems, "\n")+"\n")
		})
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./planner -run TestGolden -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s is stale (-want +got):\n%s\nrun: go test ./planner -run TestGolden -update", path, diff)
	}
}

// The planning tool offers exactly the catalog's tools, never
// agent_orchestrate or a forbidden tool, and lists their output fields.
func TestToolOffersCatalog(t *testing.T) {
	tools := append(blogTools(t, &calls{}), orchestrateTool(t))
	tool := planner.Build(7, tools, planner.BuildOptions{Forbidden: func(n string) bool { return n == "fetch_page" }})
	want := []string{"create_blog_post", "research_blog"}
	if diff := cmp.Diff(want, tool.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for variant, s := range map[string]map[string]any{"strict": tool.Strict, "loose": tool.Loose} {
		if got := toolNameEnum(s); !slices.Equal(got, want) {
			t.Errorf("%s: tool_name enum = %v, want %v", variant, got, want)
		}
	}
	if strings.Contains(tool.Prompt, orchestrate.ToolName) || strings.Contains(tool.Prompt, "fetch_page") {
		t.Errorf("the prompt mentions a tool that is not offered:\n%s", tool.Prompt)
	}
	for _, field := range []string{"artifact{sources[]{title, url}, title}, artifact_id", "post_id, words: integer"} {
		if !strings.Contains(tool.Prompt, field) {
			t.Errorf("the prompt does not list output field %q", field)
		}
	}
	if def := tool.Def(); !def.Strict || def.Name != planner.ToolName {
		t.Errorf("Def() = %+v, want the strict __planning__ tool", def)
	}
}

// toolNameEnum collects every tool_name value a planning schema allows.
func toolNameEnum(s map[string]any) []string {
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				if tn, ok := props["tool_name"].(map[string]any); ok {
					for _, e := range tn["enum"].([]any) {
						names = append(names, e.(string))
					}
				}
			}
			if props, ok := v["properties"].(map[string]any); ok {
				walk(props["calls"])
			}
			walk(v["items"])
			walk(v["anyOf"])
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(s)
	slices.Sort(names)
	return names
}

// The generated tool is cached per catalog version and rebuilt when the
// catalog changes.
func TestToolRebuiltOnCatalogChange(t *testing.T) {
	f := newFixture(t, nil, fixtureOpts{})
	first := f.planner.Tool()
	if again := f.planner.Tool(); again != first {
		t.Error("the tool was rebuilt although the catalog did not change")
	}
	f.cat.Remove("fetch_page")
	second := f.planner.Tool()
	if second == first {
		t.Fatal("the tool was not rebuilt after the catalog changed")
	}
	if slices.Contains(second.Tools, "fetch_page") || !slices.Contains(first.Tools, "fetch_page") {
		t.Errorf("tools before %v, after %v", first.Tools, second.Tools)
	}
}
