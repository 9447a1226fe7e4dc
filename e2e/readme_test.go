package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"

	"github.com/orchestra-mcp/orchestra/cli"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/redact"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the generated sections of README.md")

// generated returns the README's generated sections, made from the code.
func generated(t *testing.T) map[string]string {
	t.Helper()
	sections := map[string]string{}

	// The Agents section shows the example that the CLI tests run.
	agentsConfig, err := os.ReadFile("examples/agents/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	agentsPlan, err := os.ReadFile("examples/agents/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	sections["agents_example"] = "```yaml\n" + string(agentsConfig) + "```\n\n```json\n" + string(agentsPlan) + "```\n"

	// The tenants' profiles and prices: the example config's tests load.
	tenantsConfig, err := os.ReadFile("examples/tenants/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sections["tenants_example"] = "```yaml\n" + string(tenantsConfig) + "```\n"

	// And the handoff example that TestHandoffExample runs.
	var handoff strings.Builder
	for _, f := range []struct{ name, lang string }{{"config.yaml", "yaml"}, {"script.jsonl", "json"}, {"plan.json", "json"}, {"results.json", "json"}} {
		data, err := os.ReadFile("examples/agents/handoff/" + f.name)
		if err != nil {
			t.Fatal(err)
		}
		if handoff.Len() > 0 {
			handoff.WriteString("\n")
		}
		fmt.Fprintf(&handoff, "`examples/agents/handoff/%s`:\n\n```%s\n%s```\n", f.name, f.lang, data)
	}
	sections["agents_handoff_example"] = handoff.String()

	var ref strings.Builder
	for _, c := range cli.Commands() {
		fmt.Fprintf(&ref, "### `orchestra %s`\n\n%s\n\n```\norchestra %s %s\n", c.Name, c.Summary, c.Name, c.Args)
		var stderr bytes.Buffer
		cli.Run(context.Background(), []string{c.Name, "-h"}, strings.NewReader(""), &bytes.Buffer{}, &stderr)
		help := strings.TrimSpace(stderr.String())
		if _, flags, ok := strings.Cut(help, "\n"); ok {
			ref.WriteString(flags + "\n")
		}
		ref.WriteString("```\n\n")
	}
	ref.WriteString("Exit codes: 0 success; 1 the plan ran and did not succeed (or the server failed); 2 invalid input or usage.\n")
	sections["cli"] = ref.String()

	data, err := yaml.Marshal(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	sections["config"] = "```yaml\n" + string(data) + "```\n"

	var tools strings.Builder
	tools.WriteString("| tool | what it does |\n|---|---|\n")
	cfg := builtin.DefaultConfig()
	cfg.HTTP.AllowedHosts = []string{"example.com"} // list http_request too
	for _, tool := range builtin.Tools(cfg, builtin.Options{}) {
		summary, _, _ := strings.Cut(strings.TrimSpace(tool.Description), "\n")
		fmt.Fprintf(&tools, "| `%s` | %s |\n", tool.Name, strings.ReplaceAll(summary, "|", "\\|"))
	}
	sections["builtins"] = tools.String()

	lim := orchestrate.DefaultLimits()
	sections["limits"] = fmt.Sprintf("max_depth %d · max_steps %d · max_parallel %d · max_nesting %d · step timeout %s · plan timeout %s · step output %d KiB · response %d KiB in the envelope · max_iterations %d per loop · max_tool_calls %d, max_model_calls %d, max_agent_runs %d per request\n",
		lim.MaxDepth, lim.MaxSteps, lim.MaxParallel, lim.MaxNesting, lim.StepTimeout, lim.PlanTimeout, lim.MaxStepOutputBytes>>10, lim.MaxResponseBytes>>10, lim.MaxIterations, lim.MaxToolCalls, lim.MaxModelCalls, lim.MaxAgentRuns)
	sections["codes"] = codesSection(t)
	maps.Copy(sections, installSections(t))
	return sections
}

// codesSection is the README's table of codes, made from the declarations
// of orchestrate/codes.go: a table for each block of codes, under the
// block's comment, with each code's comment as its meaning.
func codesSection(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "orchestrate/codes.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		kind, what, _ := strings.Cut(docText(gd.Doc), ": ")
		fmt.Fprintf(&b, "**%s**: %s\n\n| code | meaning |\n|---|---|\n", kind, what)
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			value, err := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			_, meaning, ok := strings.Cut(docText(vs.Doc), ": ")
			if !ok {
				t.Fatalf("the comment of %s does not say what it means (\"%s: ...\")", vs.Names[0].Name, vs.Names[0].Name)
			}
			fmt.Fprintf(&b, "| `%s` | %s |\n", value, strings.ToUpper(meaning[:1])+meaning[1:])
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// docText is a comment's text on one line.
func docText(g *ast.CommentGroup) string {
	return strings.Join(strings.Fields(g.Text()), " ")
}

var sectionRE = regexp.MustCompile(`(?s)<!-- BEGIN GENERATED: (\w+) -->\n(.*?)<!-- END GENERATED: (\w+) -->`)

// TestReadmeGenerated fails when the README's CLI, configuration, tool and
// limit references differ from what the code says. Rewrite them with
// go test ./e2e -run TestReadmeGenerated -update-readme
func TestReadmeGenerated(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := generated(t)
	seen := map[string]bool{}
	out := sectionRE.ReplaceAllStringFunc(string(data), func(m string) string {
		sub := sectionRE.FindStringSubmatch(m)
		name := sub[1]
		seen[name] = true
		if *updateReadme {
			return "<!-- BEGIN GENERATED: " + name + " -->\n" + want[name] + "<!-- END GENERATED: " + name + " -->"
		}
		if diff := cmp.Diff(want[name], sub[2]); diff != "" {
			t.Errorf("README section %q is stale (-want +got):\n%s\nrun: go test ./e2e -run TestReadmeGenerated -update-readme", name, diff)
		}
		return m
	})
	for name := range want {
		if !seen[name] {
			t.Errorf("README has no generated section %q", name)
		}
	}
	if *updateReadme {
		if err := os.WriteFile("README.md", []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadmeCommands checks that the commands the README tells a new user
// to run are the ones that work: the quick start plan runs and succeeds.
func TestReadmeCommands(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"go run . run examples/quickstart.json", "go test ./..."} {
		if !strings.Contains(string(data), cmd) {
			t.Errorf("README does not show %q", cmd)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Run(context.Background(), []string{"run", "examples/quickstart.json"}, strings.NewReader(""), &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("orchestra run examples/quickstart.json exited %d:\n%s", code, stderr.String())
	}
}

// TestReadmeSecretParams: the README names every query parameter word and
// name internal/redact cuts out of URLs, and no other.
func TestReadmeSecretParams(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(data), "of every query parameter whose name, in any case, contains ")
	sentence, _, _ := strings.Cut(after, "(`internal/redact`)")
	var named []string
	for _, m := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(sentence, -1) {
		named = append(named, m[1])
	}
	want := append(append([]string{}, redact.SecretParamWords...), redact.SecretParamNames...)
	if diff := cmp.Diff(want, named); diff != "" {
		t.Errorf("the README's list of secret query parameters (-internal/redact +README):\n%s", diff)
	}
}
