package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/registry"
)

// Source is the registry.Tool Source of every tool in this package.
const Source = "builtin"

// Defaults applied to zero configuration fields.
const (
	DefaultJQTimeout         = 2 * time.Second
	DefaultJQMaxOutputBytes  = 1 << 20
	DefaultJQMaxResults      = 10000
	DefaultRenderOutputBytes = 1 << 20
	DefaultHTTPTimeout       = 30 * time.Second
	DefaultHTTPMaxResponse   = 4 << 20
	DefaultHTTPMaxRedirects  = 5
)

// Config configures the built-in tools. It is meant to be embedded in a
// configuration file; zero fields fall back to the defaults.
type Config struct {
	// JQ configures json_query.
	JQ JQConfig `json:"json_query" yaml:"json_query"`
	// HTTP configures http_request, which is off until it has allowed hosts.
	HTTP HTTPConfig `json:"http_request" yaml:"http_request"`
	// Render configures render.
	Render RenderConfig `json:"render" yaml:"render"`
}

// JQConfig configures json_query.
type JQConfig struct {
	// Timeout bounds one run of a jq program. Default 2s.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// MaxOutputBytes caps the JSON size of all results together. Default 1 MiB.
	MaxOutputBytes int `json:"max_output_bytes,omitempty" yaml:"max_output_bytes,omitempty"`
	// MaxResults caps how many values a program may emit. Default 10000.
	MaxResults int `json:"max_results,omitempty" yaml:"max_results,omitempty"`
}

// HTTPConfig configures http_request. The tool exists only when AllowedHosts
// is not empty.
type HTTPConfig struct {
	// AllowedHosts lists the hosts requests may go to: an exact host name
	// ("api.example.com"), a suffix wildcard ("*.example.com", which matches
	// subdomains but not example.com itself), or "*" for any host. Ports are
	// not part of a pattern.
	AllowedHosts []string `json:"allowed_hosts,omitempty" yaml:"allowed_hosts,omitempty"`
	// AllowPrivateNetworks lets requests reach loopback, private, link-local,
	// CGNAT and other non-public addresses. Off by default.
	AllowPrivateNetworks bool `json:"allow_private_networks,omitempty" yaml:"allow_private_networks,omitempty"`
	// Timeout bounds one request, redirects and body included. Default 30s.
	// A call's timeout_ms may lower it, never raise it.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// MaxResponseBytes caps the response body kept; the rest is dropped and
	// the output says truncated. Default 4 MiB.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty" yaml:"max_response_bytes,omitempty"`
	// MaxRedirects caps how many redirects are followed. Default 5; a
	// negative value follows none (the 3xx response is returned).
	MaxRedirects int `json:"max_redirects,omitempty" yaml:"max_redirects,omitempty"`
}

// RenderConfig configures render.
type RenderConfig struct {
	// MaxOutputBytes caps the rendered text. Default 1 MiB.
	MaxOutputBytes int `json:"max_output_bytes,omitempty" yaml:"max_output_bytes,omitempty"`
}

// DefaultConfig returns the configuration with every default filled in.
// http_request is off in it: it has no allowed hosts.
func DefaultConfig() Config {
	return Config{
		JQ:     JQConfig{}.withDefaults(),
		HTTP:   HTTPConfig{}.withDefaults(),
		Render: RenderConfig{}.withDefaults(),
	}
}

func (c JQConfig) withDefaults() JQConfig {
	if c.Timeout <= 0 {
		c.Timeout = Duration(DefaultJQTimeout)
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultJQMaxOutputBytes
	}
	if c.MaxResults <= 0 {
		c.MaxResults = DefaultJQMaxResults
	}
	return c
}

func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.Timeout <= 0 {
		c.Timeout = Duration(DefaultHTTPTimeout)
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultHTTPMaxResponse
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = DefaultHTTPMaxRedirects
	}
	return c
}

func (c RenderConfig) withDefaults() RenderConfig {
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultRenderOutputBytes
	}
	return c
}

// Tools returns the built-in tools configured by cfg: json_query, render,
// and http_request when cfg.HTTP.AllowedHosts is not empty.
func Tools(cfg Config) []registry.Tool {
	tools := []registry.Tool{JSONQuery(cfg.JQ), Render(cfg.Render)}
	if len(cfg.HTTP.AllowedHosts) > 0 {
		tools = append(tools, HTTPRequest(cfg.HTTP))
	}
	return tools
}

// Duration is a time.Duration that configuration files write as a string
// such as "2s" or "1m30s", or as a number of milliseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText encodes d as a duration string such as "2s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a duration string such as "2s", or a bare number of
// milliseconds.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON encodes d as a JSON string such as "2s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON decodes a JSON string such as "2s", or a JSON number of
// milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return d.UnmarshalText([]byte(s))
	}
	return d.UnmarshalText(b)
}

// MarshalYAML encodes d as a duration string such as "2s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML decodes a YAML string such as "2s", or a YAML number of
// milliseconds. It uses the function-style interface, which every major
// YAML package for Go supports.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return d.UnmarshalText([]byte(v))
	case int:
		return d.fromMillis(float64(v))
	case int64:
		return d.fromMillis(float64(v))
	case uint64:
		return d.fromMillis(float64(v))
	case float64:
		return d.fromMillis(v)
	default:
		return fmt.Errorf("invalid duration %v: write a string such as \"2s\" or a number of milliseconds", v)
	}
}

func (d *Duration) fromMillis(ms float64) error {
	if ms < 0 || math.IsNaN(ms) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return fmt.Errorf("invalid duration %v ms: it must be a non-negative number of milliseconds", ms)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		var d Duration
		err := d.fromMillis(ms)
		return d, err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: write it like \"2s\", \"500ms\" or \"1m30s\", or as a number of milliseconds", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("invalid duration %q: it must not be negative", s)
	}
	return Duration(v), nil
}
