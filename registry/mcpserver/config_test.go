package mcpserver

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		server  string
		cfg     ServerConfig
		wantErr []string // substrings; none means valid
	}{
		{name: "stdio", server: "fs", cfg: ServerConfig{Command: "npx", Args: []string{"-y", "x"}, Env: map[string]string{"A": "1"}}},
		{name: "http", server: "web-1", cfg: ServerConfig{URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "x"}}},
		{name: "neither", server: "x", wantErr: []string{`set "command"`}},
		{name: "both", server: "x", cfg: ServerConfig{Command: "a", URL: "http://b"}, wantErr: []string{"only one"}},
		{name: "double underscore", server: "a__b", cfg: ServerConfig{Command: "a"}, wantErr: []string{`"__"`}},
		{name: "bad characters", server: "my.server", cfg: ServerConfig{Command: "a"}, wantErr: []string{"letters, digits"}},
		{name: "empty name", server: "", cfg: ServerConfig{Command: "a"}, wantErr: []string{"name is empty"}},
		{name: "too long", server: strings.Repeat("a", 33), cfg: ServerConfig{Command: "a"}, wantErr: []string{"1 to 32"}},
		{name: "relative url", server: "x", cfg: ServerConfig{URL: "/mcp"}, wantErr: []string{"absolute http"}},
		{name: "ftp url", server: "x", cfg: ServerConfig{URL: "ftp://host/mcp"}, wantErr: []string{"absolute http"}},
		{name: "args with url", server: "x", cfg: ServerConfig{URL: "http://h/mcp", Args: []string{"a"}}, wantErr: []string{"stdio servers only"}},
		{name: "headers with command", server: "x", cfg: ServerConfig{Command: "a", Headers: map[string]string{"A": "b"}}, wantErr: []string{"HTTP servers only"}},
		{name: "included and excluded", server: "x", cfg: ServerConfig{Command: "a", Tools: []string{"t"}, ExcludeTools: []string{"t"}}, wantErr: []string{`"t" is both`}},
		{name: "every problem at once", server: "a__b", cfg: ServerConfig{Timeout: -1}, wantErr: []string{`"__"`, `set "command"`, "negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate(tt.server)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestConfigJSON(t *testing.T) {
	// A Claude Desktop entry with orchestra's keys added.
	const in = `{
		"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"MEMORY_FILE_PATH": "/tmp/m.jsonl"}},
		"web": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer x"},
		        "tools": ["search"], "exclude_tools": ["admin"], "expose": false, "timeout": "1m30s"},
		"slow": {"command": "slow-server", "timeout": 45000, "disabled": true}
	}`
	var got map[string]ServerConfig
	if err := json.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	no := false
	want := map[string]ServerConfig{
		"memory": {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Env: map[string]string{"MEMORY_FILE_PATH": "/tmp/m.jsonl"}},
		"web": {URL: "http://127.0.0.1:9000/mcp", Headers: map[string]string{"Authorization": "Bearer x"},
			Tools: []string{"search"}, ExcludeTools: []string{"admin"}, Expose: &no, Timeout: Duration(90 * time.Second)},
		"slow": {Command: "slow-server", Timeout: Duration(45 * time.Second), Disabled: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	for name, cfg := range got {
		if err := cfg.Validate(name); err != nil {
			t.Error(err)
		}
	}
	if got["memory"].exposed() != true || got["web"].exposed() != false {
		t.Error("expose defaults to true and follows the setting")
	}
	out, err := json.Marshal(got["web"])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"timeout":"1m30s"`) {
		t.Errorf("encoded %s, want the timeout as a duration string", out)
	}
}

func TestConfigYAML(t *testing.T) {
	const in = `
fs:
  command: npx
  args: [-y, "@modelcontextprotocol/server-filesystem", /data]
  exclude_tools: [write_file]
  timeout: 10s
web:
  url: http://127.0.0.1:9000/mcp
  timeout: 2500
`
	var got map[string]ServerConfig
	if err := yaml.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	if got["fs"].Timeout != Duration(10*time.Second) || got["web"].Timeout != Duration(2500*time.Millisecond) {
		t.Errorf("timeouts = %v, %v", got["fs"].Timeout, got["web"].Timeout)
	}
	if diff := cmp.Diff([]string{"write_file"}, got["fs"].ExcludeTools); diff != "" {
		t.Errorf("exclude_tools (-want +got):\n%s", diff)
	}
}

func TestDurationErrors(t *testing.T) {
	for _, in := range []string{`"soon"`, `-5`, `true`, `"-1s"`} {
		var d Duration
		err := json.Unmarshal([]byte(in), &d)
		if err == nil {
			t.Errorf("%s: decoded as %v, want an error", in, time.Duration(d))
		}
	}
}

func TestWants(t *testing.T) {
	cfg := ServerConfig{Tools: []string{"a", "b"}, ExcludeTools: []string{"b"}}
	for tool, want := range map[string]bool{"a": true, "b": false, "c": false} {
		if got := cfg.wants(tool); got != want {
			t.Errorf("wants(%q) = %v", tool, got)
		}
	}
	if !(ServerConfig{}).wants("anything") {
		t.Error("no lists means every tool")
	}
}

func TestEnviron(t *testing.T) {
	parent := []string{"PATH=/bin", "HOME=/root", "A=old", "GITHUB_TOKEN=ghp_secret", "ORCHESTRA_TOKENS=t1,t2",
		"LC_ALL=C.UTF-8", "AWS_REGION=eu", "AWS_SECRET_ACCESS_KEY=s3", "ORCHESTRA_DEPTH=7"}
	tests := []struct {
		name string
		cfg  ServerConfig
		want []string
	}{
		{"minimal", ServerConfig{Env: map[string]string{"A": "new", "B": "b"}},
			[]string{"PATH=/bin", "HOME=/root", "LC_ALL=C.UTF-8", "A=new", "B=b", "ORCHESTRA_DEPTH=2"}},
		{"inherit by name and pattern", ServerConfig{InheritEnv: []string{"GITHUB_TOKEN", "AWS_*"}},
			[]string{"PATH=/bin", "HOME=/root", "GITHUB_TOKEN=ghp_secret", "LC_ALL=C.UTF-8", "AWS_REGION=eu", "AWS_SECRET_ACCESS_KEY=s3", "ORCHESTRA_DEPTH=2"}},
		{"inherit everything", ServerConfig{InheritEnv: []string{"*"}},
			[]string{"PATH=/bin", "HOME=/root", "A=old", "GITHUB_TOKEN=ghp_secret", "ORCHESTRA_TOKENS=t1,t2", "LC_ALL=C.UTF-8", "AWS_REGION=eu", "AWS_SECRET_ACCESS_KEY=s3", "ORCHESTRA_DEPTH=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.cfg.environ(parent, 2)); diff != "" {
				t.Errorf("environ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServerKeysDocumented: the configuration reference of the README
// names every key of an mcpServers entry.
func TestServerKeysDocumented(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(data), "An `mcpServers` entry")
	ref, _, _ = strings.Cut(ref, "\n\n")
	if !ok {
		t.Fatal("the README's configuration reference does not describe an mcpServers entry")
	}
	for f := range reflect.TypeFor[ServerConfig]().Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !strings.Contains(ref, "`"+key+"`") {
			t.Errorf("the README's configuration reference does not name mcpServers.<name>.%s", key)
		}
	}
}
