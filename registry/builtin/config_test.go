package builtin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	yamlv4 "go.yaml.in/yaml/v4"
)

func TestDefaultConfig(t *testing.T) {
	want := Config{
		JQ:      JQConfig{Timeout: Duration(2 * time.Second), MaxOutputBytes: 1 << 20, MaxResults: 10000, MaxMemoryBytes: 128 << 20},
		HTTP:    HTTPConfig{Timeout: Duration(30 * time.Second), MaxResponseBytes: 4 << 20, MaxRedirects: 5},
		Render:  RenderConfig{MaxOutputBytes: 1 << 20, Timeout: Duration(2 * time.Second), MaxMemoryBytes: 128 << 20},
		Workers: 4,
	}
	if diff := cmp.Diff(want, DefaultConfig()); diff != "" {
		t.Errorf("DefaultConfig() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, Config{
		JQ: JQConfig{}.withDefaults(), HTTP: HTTPConfig{}.withDefaults(), Render: RenderConfig{}.withDefaults(), Workers: DefaultWorkers,
	}); diff != "" {
		t.Errorf("zero fields do not fall back to the defaults (-want +got):\n%s", diff)
	}
}

func TestTools(t *testing.T) {
	names := func(cfg Config) []string {
		var out []string
		for _, tool := range Tools(cfg, testOpts) {
			out = append(out, tool.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"json_query", "render"}, names(DefaultConfig())); diff != "" {
		t.Errorf("without allowed hosts (-want +got):\n%s", diff)
	}
	cfg := DefaultConfig()
	cfg.HTTP.AllowedHosts = []string{"api.example.com"}
	if diff := cmp.Diff([]string{"json_query", "render", "http_request"}, names(cfg)); diff != "" {
		t.Errorf("with allowed hosts (-want +got):\n%s", diff)
	}
}

const configJSON = `{
	"json_query": {"timeout": "500ms", "max_output_bytes": 1000, "max_results": 7},
	"http_request": {"allowed_hosts": ["api.example.com", "*.example.org"], "allow_private_networks": true,
	                 "timeout": 1500, "max_response_bytes": 2048, "max_redirects": -1},
	"render": {"max_output_bytes": 99}
}`

const configYAML = `
json_query:
  timeout: 500ms
  max_output_bytes: 1000
  max_results: 7
http_request:
  allowed_hosts: [api.example.com, "*.example.org"]
  allow_private_networks: true
  timeout: 1500
  max_response_bytes: 2048
  max_redirects: -1
render:
  max_output_bytes: 99
`

var wantDecodedConfig = Config{
	JQ: JQConfig{Timeout: Duration(500 * time.Millisecond), MaxOutputBytes: 1000, MaxResults: 7},
	HTTP: HTTPConfig{
		AllowedHosts: []string{"api.example.com", "*.example.org"}, AllowPrivateNetworks: true,
		Timeout: Duration(1500 * time.Millisecond), MaxResponseBytes: 2048, MaxRedirects: -1,
	},
	Render: RenderConfig{MaxOutputBytes: 99},
}

func TestConfigDecode(t *testing.T) {
	decoders := map[string]func() (Config, error){
		"json": func() (c Config, err error) { return c, json.Unmarshal([]byte(configJSON), &c) },
		"yaml/v4": func() (c Config, err error) {
			return c, yamlv4.Unmarshal([]byte(configYAML), &c)
		},
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			got, err := decode()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantDecodedConfig, got); diff != "" {
				t.Errorf("decoded config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigRoundTrip(t *testing.T) {
	b, err := json.Marshal(wantDecodedConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"timeout":"1.5s"`) {
		t.Errorf("JSON %s does not write durations as strings", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantDecodedConfig, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}

	y, err := yamlv4.Marshal(wantDecodedConfig)
	if err != nil {
		t.Fatal(err)
	}
	var backY Config
	if err := yamlv4.Unmarshal(y, &backY); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantDecodedConfig, backY); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}

func TestDurationDecode(t *testing.T) {
	tests := []struct {
		json    string
		want    time.Duration
		wantErr string
	}{
		{`"2s"`, 2 * time.Second, ""},
		{`"1m30s"`, 90 * time.Second, ""},
		{`"250"`, 250 * time.Millisecond, ""},
		{`250`, 250 * time.Millisecond, ""},
		{`0.5`, 500 * time.Microsecond, ""},
		{`null`, 0, ""},
		{`""`, 0, ""},
		{`"soon"`, 0, `invalid duration "soon"`},
		{`"-1s"`, 0, "must not be negative"},
		{`-5`, 0, "non-negative"},
		{`true`, 0, "invalid duration"},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.json), &d)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got error %v, want one containing %q", tt.json, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.json, err)
		case d.D() != tt.want:
			t.Errorf("%s: got %v, want %v", tt.json, d, tt.want)
		}
	}
	var d Duration
	if err := yamlv4.Unmarshal([]byte("[1]"), &d); err == nil || !strings.Contains(err.Error(), "invalid duration") {
		t.Errorf("YAML sequence as a duration: got %v", err)
	}
}
