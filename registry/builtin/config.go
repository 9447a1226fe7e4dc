package builtin

import (
	"net"
	"net/netip"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/duration"

	"github.com/orchestra-mcp/orchestra/registry"
)

// Source is the registry.Tool Source of every tool in this package.
const Source = "builtin"

// Defaults applied to zero configuration fields.
const (
	DefaultJQTimeout         = 2 * time.Second
	DefaultJQMaxOutputBytes  = 1 << 20
	DefaultJQMaxResults      = 10000
	DefaultJQMaxMemoryBytes  = 128 << 20
	DefaultRenderOutputBytes = 1 << 20
	DefaultRenderTimeout     = 2 * time.Second
	DefaultRenderMemoryBytes = 128 << 20
	DefaultWorkers           = 4
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
	// Workers caps the worker processes that run json_query and render
	// evaluations at once (for each memory budget); an evaluation beyond
	// them waits for one. Default 4.
	Workers int `json:"workers,omitempty" yaml:"workers,omitempty"`
}

// JQConfig configures json_query.
type JQConfig struct {
	// Timeout is the CPU time one run of a jq program may use. Default
	// 2s. (The step's own timeout bounds its wall time.)
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// MaxOutputBytes caps the JSON size of all results together. Default 1 MiB.
	MaxOutputBytes int `json:"max_output_bytes,omitempty" yaml:"max_output_bytes,omitempty"`
	// MaxResults caps how many values a program may emit. Default 10000.
	MaxResults int `json:"max_results,omitempty" yaml:"max_results,omitempty"`
	// MaxMemoryBytes is the memory a program may use: past it the worker
	// process running it dies of its address-space limit and the call
	// fails (a program that doubles a string 40 times would otherwise
	// take gigabytes). Default 128 MiB.
	MaxMemoryBytes int64 `json:"max_memory_bytes,omitempty" yaml:"max_memory_bytes,omitempty"`
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

	// Resolver resolves host names; nil means the system's. It is set in
	// code (tests point it at a fake DNS server), never from a file.
	Resolver *net.Resolver `json:"-" yaml:"-"`
	// AllowAddr, when not nil, lets the address guard pass the dialed
	// addresses it reports true for. It is set in code (tests use it to
	// stand a loopback server in for a public one), never from a file.
	AllowAddr func(netip.AddrPort) bool `json:"-" yaml:"-"`
}

// RenderConfig configures render.
type RenderConfig struct {
	// MaxOutputBytes caps the rendered text. Default 1 MiB.
	MaxOutputBytes int `json:"max_output_bytes,omitempty" yaml:"max_output_bytes,omitempty"`
	// Timeout is the CPU time one rendering may use. Default 2s.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// MaxMemoryBytes is the memory one rendering may use, as
	// json_query.max_memory_bytes. Default 128 MiB.
	MaxMemoryBytes int64 `json:"max_memory_bytes,omitempty" yaml:"max_memory_bytes,omitempty"`
}

// DefaultConfig returns the configuration with every default filled in.
// http_request is off in it: it has no allowed hosts.
func DefaultConfig() Config {
	return Config{
		JQ:      JQConfig{}.withDefaults(),
		HTTP:    HTTPConfig{}.withDefaults(),
		Render:  RenderConfig{}.withDefaults(),
		Workers: DefaultWorkers,
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
	if c.MaxMemoryBytes <= 0 {
		c.MaxMemoryBytes = DefaultJQMaxMemoryBytes
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
	if c.Timeout <= 0 {
		c.Timeout = Duration(DefaultRenderTimeout)
	}
	if c.MaxMemoryBytes <= 0 {
		c.MaxMemoryBytes = DefaultRenderMemoryBytes
	}
	return c
}

// Options are what the built-in tools share with the program that runs
// them, which owns them.
type Options struct {
	// Workers are the worker processes json_query and render evaluate in;
	// the program closes them when it is done with the tools. nil gives
	// the tools made by one call workers of their own, whose idle workers
	// end after a minute.
	Workers *Workers
	// Listeners are the addresses the program serves orchestra on:
	// http_request refuses to connect to them. nil: none.
	Listeners *Listeners

	// hostAddrs returns this host's own addresses; nil reads the network
	// interfaces'. Tests set it.
	hostAddrs func() []netip.Addr
}

// workers returns the workers of the tools o makes.
func (o Options) workers() *Workers {
	if o.Workers == nil {
		return &Workers{}
	}
	return o.Workers
}

// Tools returns the built-in tools configured by cfg: json_query, render,
// and http_request when cfg.HTTP.AllowedHosts is not empty.
func Tools(cfg Config, opts Options) []registry.Tool {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	w := opts.workers()
	jq, render := cfg.JQ.withDefaults(), cfg.Render.withDefaults()
	tools := []registry.Tool{
		jsonQueryTool(jq, newEvaluator(jq.MaxMemoryBytes, cfg.Workers, w)),
		renderTool(render, newEvaluator(render.MaxMemoryBytes, cfg.Workers, w)),
	}
	if len(cfg.HTTP.AllowedHosts) > 0 {
		tools = append(tools, HTTPRequest(cfg.HTTP, opts))
	}
	return tools
}

// Duration is a duration written as "2s" or as a number of milliseconds.
type Duration = duration.Duration
