package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// listReadReport is the job of TestLoopOverRealFiles in one call: list a
// directory with server-filesystem, keep the file names, read every file
// (four at a time), and render a report from the array of their contents.
func listReadReport(dir string) map[string]any {
	return map[string]any{
		"bindings": map[string]any{"dir": dir},
		"plan": map[string]any{"steps": []any{
			map[string]any{"id": "list", "tool": "fs__list_directory", "arguments": map[string]any{"path": "$bindings.dir"}},
			map[string]any{"id": "names", "tool": "json_query", "arguments": map[string]any{
				"query": `[.content | split("\n")[] | select(startswith("[FILE] ")) | ltrimstr("[FILE] ")]`, "input": "$list.output"}},
			map[string]any{"id": "reads", "for_each": "$names.output.result", "as": "file", "max_concurrency": 4,
				"do": map[string]any{"tool": "fs__read_text_file", "arguments": map[string]any{"path": "${bindings.dir}/${file}"}}},
			map[string]any{"id": "report", "tool": "render", "arguments": map[string]any{
				"template": "{{range $i, $r := .reads}}{{index $.names $i}}: {{$r.content}}\n{{end}}",
				"values":   map[string]any{"reads": "$reads.output", "names": "$names.output.result"}}},
		}},
	}
}

// With the real filesystem server: list a directory, read each file in a
// loop, render a report — one call; an empty directory makes []; a source
// that is no array, a field the elements lack and a count over
// max_iterations known before the run fail at plan time, and one known
// only when the list resolves fails then, naming the limit.
func TestLoopOverRealFiles(t *testing.T) {
	root := t.TempDir()
	files, empty, many := filepath.Join(root, "files"), filepath.Join(root, "empty"), filepath.Join(root, "many")
	for _, d := range []string{files, empty, many} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(files, fmt.Sprintf("f%02d.txt", i)), []byte(fmt.Sprintf("text %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(files, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("m%03d.txt", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, cs := downstreamApp(t, map[string]mcpserver.ServerConfig{"fs": npmServer(t, "server-filesystem", root)}, nil)

	t.Run("list, read each, report", func(t *testing.T) {
		res, env := servertest.Call(t, cs, listReadReport(files), nil)
		if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
			t.Fatalf("the plan failed:\n%s", servertest.Text(res))
		}
		loop := env.Artifact.Steps[2]
		if len(loop.Children) != 10 || len(loop.Output.([]any)) != 10 {
			t.Fatalf("the loop ran %d iterations with %d outputs; want 10", len(loop.Children), len(loop.Output.([]any)))
		}
		report := env.Artifact.Steps[3].Output.(map[string]any)["text"].(string)
		var want strings.Builder
		for i := range 10 {
			fmt.Fprintf(&want, "f%02d.txt: text %d\n", i, i)
		}
		if report != want.String() {
			t.Errorf("report:\n%s\nwant:\n%s", report, want.String())
		}
	})

	t.Run("the README's example", func(t *testing.T) {
		readme, err := os.ReadFile("../README.md")
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(readme), "### Loops and conditions")
		_, rest, _ = strings.Cut(rest, "```json\n")
		block, _, _ := strings.Cut(rest, "```")
		var args map[string]any
		if err := json.Unmarshal([]byte(block), &args); err != nil {
			t.Fatalf("the example is no JSON: %v", err)
		}
		args["bindings"] = map[string]any{"dir": files}
		res, env := servertest.Call(t, cs, args, nil)
		if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
			t.Fatalf("the plan failed:\n%s", servertest.Text(res))
		}
		if report := env.Artifact.Steps[4].Output.(map[string]any)["text"].(string); !strings.HasPrefix(report, "f00.txt: text 0\n") {
			t.Errorf("report %q", report)
		}
	})

	t.Run("empty directory", func(t *testing.T) {
		res, env := servertest.Call(t, cs, listReadReport(empty), nil)
		if res.IsError || env.Artifact.Status != orchestrate.StatusSuccess {
			t.Fatalf("the plan failed:\n%s", servertest.Text(res))
		}
		if out, ok := env.Artifact.Steps[2].Output.([]any); !ok || len(out) != 0 {
			t.Errorf("loop output %#v, want []", env.Artifact.Steps[2].Output)
		}
	})

	t.Run("over max_iterations when the list resolves", func(t *testing.T) {
		res, env := servertest.Call(t, cs, listReadReport(many), nil)
		if !res.IsError || env.Artifact.Status != orchestrate.StatusFailed {
			t.Fatalf("the plan did not fail:\n%s", servertest.Text(res))
		}
		loop := env.Artifact.Steps[2]
		if loop.Error == nil || loop.Error.Code != orchestrate.CodeLimitExceeded || !strings.Contains(loop.Error.Message, "limits.max_iterations") || len(loop.Children) != 0 {
			t.Errorf("loop %s with error %+v and %d iterations", loop.Status, loop.Error, len(loop.Children))
		}
	})

	names := make([]any, 100)
	for i := range names {
		names[i] = map[string]any{"name": fmt.Sprintf("m%03d.txt", i)}
	}
	for _, tc := range []struct {
		name, source, path string
		code               orchestrate.Code
		bindings           map[string]any
	}{
		{"source that is no array", "$list.output.content", "${bindings.dir}/${file}", orchestrate.CodeNotAnArray, nil},
		{"field the elements lack", "$bindings.names", "${bindings.dir}/${file.path}", orchestrate.CodeFieldNotFound, map[string]any{"names": names[:2]}},
		{"count known over max_iterations", "$bindings.names", "${bindings.dir}/${file.name}", orchestrate.CodeLimitExceeded, map[string]any{"names": names}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bindings := map[string]any{"dir": many}
			for k, v := range tc.bindings {
				bindings[k] = v
			}
			res, env := servertest.Call(t, cs, map[string]any{"bindings": bindings, "plan": map[string]any{"steps": []any{
				map[string]any{"id": "list", "tool": "fs__list_directory", "arguments": map[string]any{"path": "$bindings.dir"}},
				map[string]any{"id": "reads", "for_each": tc.source, "as": "file",
					"do": map[string]any{"tool": "fs__read_text_file", "arguments": map[string]any{"path": tc.path}}},
			}}}, nil)
			errs := env.Artifact.ValidationErrors
			if !res.IsError || len(errs) != 1 || errs[0].Code != tc.code {
				t.Fatalf("want one %s validation error:\n%s", tc.code, servertest.Text(res))
			}
			for _, s := range env.Artifact.Steps {
				if s.Status != orchestrate.StatusSkipped {
					t.Errorf("step %s is %s: nothing may run", s.ID, s.Status)
				}
			}
		})
	}
}
