package builtin

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/registry"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// allTools returns every built-in tool, http_request included.
func allTools() []registry.Tool {
	cfg := DefaultConfig()
	cfg.HTTP.AllowedHosts = []string{"127.0.0.1"}
	cfg.HTTP.AllowPrivateNetworks = true
	return Tools(cfg, testOpts)
}

// TestSchemaSnapshots compares every tool's schemas with the golden files
// in testdata. Run with -update to rewrite them after a deliberate change.
func TestSchemaSnapshots(t *testing.T) {
	for _, tool := range allTools() {
		for kind, schema := range map[string]*jsonschema.Schema{"input": tool.InputSchema, "output": tool.OutputSchema} {
			t.Run(tool.Name+"/"+kind, func(t *testing.T) {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				if err := enc.Encode(schema); err != nil {
					t.Fatal(err)
				}
				got := buf.Bytes()
				path := filepath.Join("testdata", tool.Name+"."+kind+".golden")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("%s schema of %s changed (-want +got); run go test -update if it is meant to:\n%s", kind, tool.Name, diff)
				}
			})
		}
	}
}

// TestToolInvariants checks what every tool in the catalog must have.
func TestToolInvariants(t *testing.T) {
	tools := allTools()
	registry.NewCatalog(tools...) // panics on a bad or duplicate name
	for _, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			summary, rest, _ := strings.Cut(tool.Description, "\n")
			if summary == "" || !strings.HasSuffix(summary, ".") || len(summary) > 100 {
				t.Errorf("description must start with a one-line summary sentence, got %q", summary)
			}
			if len(rest) < 100 {
				t.Errorf("description has no usage guidance after its summary: %q", tool.Description)
			}
			if tool.Annotations == nil {
				t.Fatal("no annotations")
			}
			if tool.Annotations.Title == "" || tool.Title == "" {
				t.Error("no title")
			}
			if tool.Source != "builtin" {
				t.Errorf("source = %q, want builtin", tool.Source)
			}
			if tool.Call == nil {
				t.Error("no Call")
			}
			if tool.Mode != registry.ServerFinal {
				t.Errorf("mode = %v, want server-final", tool.Mode)
			}
			for kind, s := range map[string]*jsonschema.Schema{"input": tool.InputSchema, "output": tool.OutputSchema} {
				if s == nil || s.Type != "object" {
					t.Errorf("%s schema is not an object schema: %v", kind, s)
					continue
				}
				if _, err := s.Resolve(nil); err != nil {
					t.Errorf("%s schema does not resolve: %v", kind, err)
				}
				for name, p := range s.Properties {
					if p.Description == "" {
						t.Errorf("%s property %q has no description", kind, name)
					}
				}
			}
			if ap := tool.InputSchema.AdditionalProperties; ap == nil || ap.Not == nil {
				t.Errorf("input schema allows additional properties: %v", ap)
			}
		})
	}
}

func TestAnnotations(t *testing.T) {
	for _, tool := range allTools() {
		a := tool.Annotations
		readOnly := tool.Name != "http_request"
		if a.ReadOnlyHint != readOnly {
			t.Errorf("%s: read-only = %v, want %v", tool.Name, a.ReadOnlyHint, readOnly)
		}
		if open := a.OpenWorldHint != nil && *a.OpenWorldHint; open == readOnly {
			t.Errorf("%s: open-world = %v, want %v", tool.Name, open, !readOnly)
		}
	}
}

// TestOutputsMatchSchemas calls each tool and validates its arguments
// against its input schema and its output against its output schema, so
// that plan-time checks against the schemas describe what runs.
func TestOutputsMatchSchemas(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	calls := map[string][]string{
		"json_query": {
			`{"query": ".a", "input": {"a": 1}}`,
			`{"query": ".[]", "input": [1, "x"], "vars": {"v": null}}`,
			`{"query": "empty"}`,
		},
		"render": {
			`{"template": "{{.a}}", "values": {"a": 1}}`,
			`{"template": ""}`,
		},
		"http_request": {
			fmt.Sprintf(`{"url": %q, "method": "POST", "body": {"a": 1}, "headers": {"X-A": "b"}, "query": {"q": [1, "x"]}, "timeout_ms": 5000}`, srv.URL),
			fmt.Sprintf(`{"url": %q, "method": "HEAD"}`, srv.URL),
		},
	}
	for _, tool := range allTools() {
		in, err := tool.InputSchema.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tool.OutputSchema.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(calls[tool.Name]) == 0 {
			t.Errorf("no sample calls for %s", tool.Name)
		}
		for _, args := range calls[tool.Name] {
			t.Run(tool.Name, func(t *testing.T) {
				if err := in.Validate(roundTrip(t, decodeArgs(t, args, false))); err != nil {
					t.Errorf("arguments %s do not match the input schema: %v", args, err)
				}
				res, err := call(t, tool, args)
				if err != nil || res.IsError {
					t.Fatalf("got %v, %v", res.Text(), err)
				}
				if err := out.Validate(roundTrip(t, res.Output())); err != nil {
					var b bytes.Buffer
					json.NewEncoder(&b).Encode(res.Output())
					t.Errorf("output %s does not match the output schema: %v", b.String(), err)
				}
			})
		}
	}
}
