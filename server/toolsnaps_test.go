package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/schemas"
)

var updateSnaps = flag.Bool("update", false, "rewrite the tool snapshots in __toolsnaps__ with what the server lists")

// listedTools connects a client to a server with every built-in tool and
// returns the session and the tools it is offered, as it decodes them.
func listedTools(t *testing.T) (*mcp.ClientSession, []*mcp.Tool) {
	t.Helper()
	cfg := config.Default()
	cfg.Builtins.HTTP.AllowedHosts = []string{"api.example.com"} // lists http_request too
	cs := connectObs(t, appWithStore(t, "memory", cfg), nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, res.Tools
}

// TestToolSnapshots compares every tool the server lists (its name, title,
// description, annotations, input and output schemas, as a client receives
// them) with its snapshot in __toolsnaps__, so that no change to what
// clients see goes unnoticed. Rewrite them with go test -run
// TestToolSnapshots -update ./server/ after a deliberate change.
func TestToolSnapshots(t *testing.T) {
	const dir = "__toolsnaps__"
	_, tools := listedTools(t)
	listed := map[string]bool{}
	for _, tool := range tools {
		listed[tool.Name] = true
		t.Run(tool.Name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(tool); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join(dir, tool.Name+".snap")
			if *updateSnaps {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: run go test -run TestToolSnapshots -update ./server/ to write it", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s changed (-snapshot +listed); if that is meant, run go test -run TestToolSnapshots -update ./server/:\n%s", tool.Name, diff)
			}
		})
	}
	for _, want := range []string{"agent_orchestrate", "json_query", "render", "http_request"} {
		if !listed[want] {
			t.Errorf("%s is not listed", want)
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	for _, p := range snaps {
		name := strings.TrimSuffix(filepath.Base(p), ".snap")
		if listed[name] {
			continue
		}
		if *updateSnaps {
			os.Remove(p)
		} else {
			t.Errorf("%s is the snapshot of a tool the server no longer lists; delete it, or run with -update", p)
		}
	}
}

// TestNoBooleanSubschemas: no tool orchestra lists has a bare true or
// false where a client expects a schema object (several clients reject
// the whole tool list for one); additionalProperties and its kin may keep
// their booleans.
func TestNoBooleanSubschemas(t *testing.T) {
	_, tools := listedTools(t)
	for _, tool := range tools {
		for kind, s := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
			if s == nil {
				continue
			}
			data, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			found, err := schemas.BooleanSubschemas(data)
			if err != nil {
				t.Fatalf("%s %s: %v", tool.Name, kind, err)
			}
			for _, at := range found {
				t.Errorf("%s: %s has a boolean schema at %s", tool.Name, kind, at)
			}
		}
	}
}
