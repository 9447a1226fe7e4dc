package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/internal/duration"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/internal/suggest"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/workflows"
)

// Config is the whole configuration file.
type Config struct {
	// Limits cap what plans may do; requests may only lower them.
	Limits Limits `yaml:"limits" json:"limits"`
	// Builtins configures the built-in tools.
	Builtins builtin.Config `yaml:"builtins" json:"builtins"`
	// Server configures the MCP server.
	Server Server `yaml:"server" json:"server"`
	// MCPServers are the downstream MCP servers whose tools plans call, in
	// the shape of Claude Desktop's mcpServers block.
	MCPServers map[string]mcpserver.ServerConfig `yaml:"mcpServers" json:"mcpServers"`
	// Planner is the model that turns a prompt into a plan (and writes the
	// answer of orchestra ask). Without one, agent_orchestrate samples the
	// client's own model when the client supports sampling.
	Planner *Planner `yaml:"planner" json:"planner"`
	// Store keeps the execution records of runs.
	Store Store `yaml:"store" json:"store"`
	// Agents are models with instructions and allowed tools, each the
	// catalog tool agent__<name> (see package agents).
	Agents map[string]agents.Config `yaml:"agents" json:"agents,omitempty"`
	// Workflows are plans kept under a name, each the tool
	// workflow__<name>, called with no model (see package workflows).
	Workflows map[string]workflows.Config `yaml:"workflows,omitempty" json:"workflows,omitempty"`
	// Tenants group HTTP callers, each group with its own tools, limits,
	// planner and records; see Tenant.
	Tenants map[string]Tenant `yaml:"tenants,omitempty" json:"tenants,omitempty"`
	// Pricing is what models cost, by model name, in US dollars per
	// million tokens: runs, agents and records show a cost_usd only for
	// models priced here.
	Pricing llm.Prices `yaml:"pricing,omitempty" json:"pricing,omitempty"`
	// ClientFinalTools are globs over tool names: a plan that reaches one
	// of these tools pauses for its client to run it, as for the request's
	// client_tools.
	ClientFinalTools []string `yaml:"client_final_tools" json:"client_final_tools"`

	// path is the file the configuration came from.
	path string
}

// Limits are the configurable limits of orchestrations. Zero values take
// the defaults.
type Limits struct {
	// The engine's limits: max_depth, max_steps, max_parallel, max_nesting,
	// max_attempts, step_timeout, plan_timeout, max_step_output_bytes,
	// max_response_bytes, max_templates.
	orchestrate.Limits `yaml:",inline"`
	// PlannerAttempts is how many plans the planner asks the model for
	// before giving up: the first answer and repairs with the errors fed back.
	PlannerAttempts int `yaml:"planner_attempts" json:"planner_attempts"`
	// MaxToolSteps bounds the model turns of the reactive fallback.
	MaxToolSteps int `yaml:"max_tool_steps" json:"max_tool_steps"`
	// MaxConcurrentPlans caps the orchestrations running at once in this
	// process; a call beyond it fails at once with the code busy rather
	// than waiting in a queue.
	MaxConcurrentPlans int `yaml:"max_concurrent_plans" json:"max_concurrent_plans"`
	// PlansPerOwner is how many of those plans one caller (a token's or a
	// JWT subject's holder; without authentication, a session) may always
	// run at once; it may run more only while as many slots stay free for
	// the others. Default a quarter of max_concurrent_plans.
	PlansPerOwner int `yaml:"plans_per_owner" json:"plans_per_owner"`
	// PlansPerTenant is how many a tenant's callers together may always
	// run at once, more only under the same condition. Default half of
	// max_concurrent_plans.
	PlansPerTenant int `yaml:"plans_per_tenant" json:"plans_per_tenant"`
	// QueueTimeout is how long a call waits for a slot when it may not
	// take one now; a freed slot goes to the waiting caller that runs the
	// fewest plans. Past it the call fails with busy. Default 10s.
	QueueTimeout time.Duration `yaml:"queue_timeout" json:"queue_timeout"`
	// MaxBackground is how many background runs ("background": true) one
	// caller may hold at once, running or waiting for a slot; one more is
	// refused with queue_full until one of them ends. A tenant's callers
	// together are bounded by the tenant's own max_background. Default an
	// eighth of max_concurrent_plans.
	MaxBackground int `yaml:"max_background" json:"max_background"`
	// BackgroundQueueDepth is how many background runs the process holds
	// at once, all callers together; one more is refused with queue_full.
	// Each holds a slot of max_concurrent_plans while it runs, so the
	// depth below that keeps slots for calls that wait for their answer.
	// Default half of max_concurrent_plans.
	BackgroundQueueDepth int `yaml:"background_queue_depth" json:"background_queue_depth"`
	// MaxDownstreamResponseBytes is the largest tool result, as JSON, that
	// a downstream MCP server may return; a larger one fails the call.
	MaxDownstreamResponseBytes int64 `yaml:"max_downstream_response_bytes" json:"max_downstream_response_bytes"`
	// IdempotencyTTL is how long a call's idempotency key holds: a repeat
	// by the same caller within it returns the first call's result.
	// Default 24h.
	IdempotencyTTL time.Duration `yaml:"idempotency_ttl" json:"idempotency_ttl"`
}

// Server configures the MCP server and its HTTP transport.
type Server struct {
	// MaxRequestBytes caps the size of one request. Default 4 MiB.
	MaxRequestBytes int64 `yaml:"max_request_bytes" json:"max_request_bytes"`
	// MaxRequestDepth caps how deeply one request's JSON nests. Default
	// 1000, which is also what MCP SDKs parse.
	MaxRequestDepth int `yaml:"max_request_depth,omitempty" json:"max_request_depth,omitempty"`
	// MaxRequestElements caps the values in one request's JSON (each array
	// element and object member), so that decoding it materialises a
	// bounded amount whatever its bytes. Default 500,000.
	MaxRequestElements int `yaml:"max_request_elements,omitempty" json:"max_request_elements,omitempty"`
	// ShutdownGrace is how long in-flight plans may finish on shutdown
	// before they are cancelled. Default 10s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace" json:"shutdown_grace"`
	// SessionTimeout closes idle HTTP sessions. Default 30m; 0 keeps them.
	SessionTimeout *time.Duration `yaml:"session_timeout" json:"session_timeout"`
	// MaxSessions caps the open HTTP sessions; an initialize beyond it is
	// refused with a JSON-RPC error until idle sessions expire. Default 4096.
	MaxSessions int `yaml:"max_sessions" json:"max_sessions"`
	// HeaderTimeout bounds how long a client may take to send a request's
	// headers. Default 10s.
	HeaderTimeout time.Duration `yaml:"header_timeout" json:"header_timeout"`
	// BodyTimeout bounds how long a client may take to send a request's
	// body once its headers are in. Default 30s.
	BodyTimeout time.Duration `yaml:"body_timeout" json:"body_timeout"`
	// MaxConnections caps the open HTTP connections; one beyond it is
	// closed at once. Default 2048.
	MaxConnections int `yaml:"max_connections" json:"max_connections"`
	// MaxConnectionsPerClient caps the open connections of one remote
	// address, so that one client cannot take every connection. Default 256.
	MaxConnectionsPerClient int `yaml:"max_connections_per_client" json:"max_connections_per_client"`
	// ExposeBuiltins lists the built-in tools directly to clients, next to
	// agent_orchestrate. Default true.
	ExposeBuiltins *bool `yaml:"expose_builtins" json:"expose_builtins"`
	// ExposeDownstream lists the tools of downstream servers and the
	// built-in tools directly to clients, next to agent_orchestrate.
	// Default true; false lists only agent_orchestrate and orchestra_tools,
	// which describes the others, for clients that pay for every listed
	// tool's definition.
	ExposeDownstream *bool `yaml:"expose_downstream,omitempty" json:"expose_downstream,omitempty"`
	// Response is the response of agent_orchestrate when a call names
	// none: "compact" (default) or "full".
	Response string `yaml:"response,omitempty" json:"response,omitempty"`
	// StateKeyEnv names the environment variable holding the key that signs
	// the state of multi round-trip sampling. Instances serving the same
	// clients need the same key; without one, each process makes its own.
	StateKeyEnv string `yaml:"state_key_env,omitempty" json:"state_key_env,omitempty"`
	// Auth turns on bearer-token authentication of HTTP requests.
	Auth Auth `yaml:"auth" json:"auth"`
	// RateLimit caps the HTTP requests of each client.
	RateLimit RateLimit `yaml:"rate_limit" json:"rate_limit"`
}

// Auth configures bearer-token authentication of the HTTP transport. With
// tokens configured, every request to /mcp must carry one of them as
// "Authorization: Bearer TOKEN", and orchestra may listen on non-loopback
// addresses. Tokens are never written to logs.
type Auth struct {
	// TokensEnv names an environment variable holding the accepted tokens,
	// separated by commas, spaces or newlines.
	TokensEnv string `yaml:"tokens_env,omitempty" json:"tokens_env,omitempty"`
	// TokensFile is a file holding the accepted tokens, one a line; blank
	// lines and lines starting with # are ignored.
	TokensFile string `yaml:"tokens_file,omitempty" json:"tokens_file,omitempty"`
	// Tokens are named tokens: each name is its holder's user id.
	Tokens []NamedToken `yaml:"tokens,omitempty" json:"tokens,omitempty"`
	// JWT accepts OAuth access tokens (JWTs) besides the static tokens.
	JWT *JWT `yaml:"jwt,omitempty" json:"jwt,omitempty"`
}

// Enabled reports whether a source of tokens is configured.
func (a Auth) Enabled() bool {
	return a.TokensEnv != "" || a.TokensFile != "" || len(a.Tokens) > 0 || a.JWT != nil
}

// RateLimit configures per-client rate limits of the HTTP transport; a
// client is its bearer token, or its remote address without one. A client
// over its limit gets 429 with Retry-After.
type RateLimit struct {
	// RequestsPerSecond is the sustained rate allowed to each client.
	// Default 50; negative turns the limit off.
	RequestsPerSecond float64 `yaml:"requests_per_second" json:"requests_per_second"`
	// Burst is how many requests a client may send at once. Default 100.
	Burst int `yaml:"burst" json:"burst"`
}

// Store configures the execution records.
type Store struct {
	// Path is the SQLite database; "memory" keeps nothing on disk. Empty
	// means $XDG_STATE_HOME/orchestra/orchestra.db for the CLI (a --store
	// flag overrides it) and memory for an embedded server.
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// URL is a PostgreSQL database (postgres://user@host/db) that several
	// replicas share, instead of Path.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// Lease is how long a replica's lease on its runs lasts on PostgreSQL:
	// a run whose replica stopped renewing it is interrupted after it.
	// Default 30s.
	Lease duration.Duration `yaml:"lease,omitempty" json:"lease,omitempty"`
	// Retention says which finished runs are deleted.
	Retention Retention `yaml:"retention" json:"retention"`
}

// Retention bounds the execution records kept. Zero values take the
// defaults.
type Retention struct {
	// MaxAge deletes runs that started longer ago. Default 720h (30 days).
	MaxAge duration.Duration `yaml:"max_age" json:"max_age"`
	// MaxRuns keeps only the newest runs. Default 10000.
	MaxRuns int `yaml:"max_runs" json:"max_runs"`
	// ConversationMaxAge deletes the turns of conversations added longer
	// ago. Default 720h (30 days).
	ConversationMaxAge duration.Duration `yaml:"conversation_max_age,omitempty" json:"conversation_max_age,omitempty"`
	// ConversationTurns keeps only the newest turns of each conversation.
	// Default 200.
	ConversationTurns int `yaml:"conversation_turns,omitempty" json:"conversation_turns,omitempty"`
}

// Store returns the store's retention policy.
func (r Retention) Store() store.Retention {
	return store.Retention{MaxAge: r.MaxAge.D(), MaxRuns: r.MaxRuns, ConversationMaxAge: r.ConversationMaxAge.D(), MaxConversationTurns: r.ConversationTurns}
}

// Default values of Store.
const (
	DefaultRetentionMaxAge  = 30 * 24 * time.Hour
	DefaultRetentionMaxRuns = 10000
)

// Default values of Server.
const (
	DefaultMaxRequestBytes = 4 << 20
	DefaultShutdownGrace   = 10 * time.Second
	DefaultSessionTimeout  = 30 * time.Minute
	DefaultMaxSessions     = 4096
	DefaultHeaderTimeout   = 10 * time.Second
	DefaultBodyTimeout     = 30 * time.Second
	DefaultMaxConnections  = 2048

	DefaultMaxConnectionsPerClient = 256
	DefaultRateLimit               = 50
	DefaultRateBurst               = 100

	DefaultMaxConcurrentPlans         = 64
	DefaultQueueTimeout               = 10 * time.Second
	DefaultIdempotencyTTL             = 24 * time.Hour
	DefaultMaxDownstreamResponseBytes = 8 << 20
)

// Default returns the configuration used when no file is given.
func Default() *Config {
	c := &Config{Builtins: builtin.DefaultConfig()}
	c.applyDefaults()
	return c
}

// Path returns the file the configuration was loaded from, if any.
func (c *Config) Path() string { return c.path }

// EngineLimits returns the limits for the plan engine.
func (c *Config) EngineLimits() orchestrate.Limits { return c.Limits.Limits }

// RequestGate returns the decoding gate's limits for one request.
func (s Server) RequestGate() jsongate.Limits {
	return jsongate.Limits{Bytes: s.MaxRequestBytes, Depth: s.MaxRequestDepth, Elements: s.MaxRequestElements}
}

// ExposeDownstreamTools reports whether the catalog's tools are listed to
// clients next to agent_orchestrate.
func (s Server) ExposeDownstreamTools() bool { return s.ExposeDownstream == nil || *s.ExposeDownstream }

// ExposeBuiltins reports whether built-in tools are listed to clients.
func (s Server) ExposeBuiltinTools() bool { return s.ExposeBuiltins == nil || *s.ExposeBuiltins }

// applyDefaults fills in the limits the file leaves out.
func (l *Limits) applyDefaults() {
	l.Limits = l.Limits.WithDefaults()
	setInt(&l.PlannerAttempts, planner.DefaultAttempts)
	setInt(&l.MaxToolSteps, planner.DefaultMaxToolSteps)
	setInt(&l.MaxConcurrentPlans, DefaultMaxConcurrentPlans)
	setInt(&l.PlansPerOwner, max(1, l.MaxConcurrentPlans/4))
	setInt(&l.PlansPerTenant, max(1, l.MaxConcurrentPlans/2))
	setInt(&l.MaxBackground, max(1, l.MaxConcurrentPlans/8))
	setInt(&l.BackgroundQueueDepth, max(1, l.MaxConcurrentPlans/2))
	if l.QueueTimeout == 0 {
		l.QueueTimeout = DefaultQueueTimeout
	}
	if l.MaxDownstreamResponseBytes == 0 {
		l.MaxDownstreamResponseBytes = DefaultMaxDownstreamResponseBytes
	}
	if l.IdempotencyTTL == 0 {
		l.IdempotencyTTL = DefaultIdempotencyTTL
	}
}

func (c *Config) applyDefaults() {
	c.Limits.applyDefaults()
	if c.Server.RateLimit.RequestsPerSecond == 0 {
		c.Server.RateLimit.RequestsPerSecond = DefaultRateLimit
	}
	setInt(&c.Server.RateLimit.Burst, DefaultRateBurst)
	if c.Store.Retention.MaxAge == 0 {
		c.Store.Retention.MaxAge = duration.Duration(DefaultRetentionMaxAge)
	}
	setInt(&c.Store.Retention.MaxRuns, DefaultRetentionMaxRuns)
	if c.Store.URL != "" {
		c.Store.Path = c.Store.URL // the store opens either by its location
	}
	if c.Server.MaxRequestBytes == 0 {
		c.Server.MaxRequestBytes = DefaultMaxRequestBytes
	}
	setInt(&c.Server.MaxRequestDepth, jsongate.DefaultDepth)
	setInt(&c.Server.MaxRequestElements, jsongate.DefaultElements)
	if c.Server.ShutdownGrace == 0 {
		c.Server.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Server.ExposeBuiltins == nil {
		t := true
		c.Server.ExposeBuiltins = &t
	}
	if c.Server.SessionTimeout == nil {
		t := DefaultSessionTimeout
		c.Server.SessionTimeout = &t
	}
	setInt(&c.Server.MaxSessions, DefaultMaxSessions)
	setInt(&c.Server.MaxConnections, DefaultMaxConnections)
	setInt(&c.Server.MaxConnectionsPerClient, DefaultMaxConnectionsPerClient)
	if c.Server.HeaderTimeout == 0 {
		c.Server.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.Server.BodyTimeout == 0 {
		c.Server.BodyTimeout = DefaultBodyTimeout
	}
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

// MaxFileBytes caps a configuration file: reading stops there, so that
// a path such as /dev/zero fails at once rather than filling memory.
const MaxFileBytes = 4 << 20

// ReadFile reads a file the operator names (the configuration, a token
// file), stopping at MaxFileBytes: a path such as /dev/zero fails at once
// with an error that says the file is larger than the limit.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := jsongate.Limits{Bytes: MaxFileBytes}.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: the file %w", path, err)
	}
	return data, nil
}

// Load reads the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		if _, ok := jsongate.AsError(err); ok {
			return nil, fmt.Errorf("reading config %w; a configuration file is a few kilobytes of YAML or JSON", err)
		}
		return nil, fmt.Errorf("reading config: %w", err)
	}
	c, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s%w", path, err)
	}
	c.path = path
	return c, nil
}

// Parse parses a configuration from YAML or JSON, expanding ${NAME} with
// lookup. Errors start with ":line: " so that the file name can go before.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return Default(), nil // an empty file
		}
		return nil, yamlError(err)
	}
	if err := expand(&root, lookup, ""); err != nil {
		return nil, err
	}
	if err := checkKeys(&root, reflect.TypeFor[Config](), ""); err != nil {
		return nil, err
	}
	c := &Config{Builtins: builtin.DefaultConfig()}
	if err := root.Decode(c); err != nil {
		return nil, yamlError(err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	c.applyDefaults()
	return c, nil
}

func (c *Config) validate() error {
	var problems []string
	l := c.Limits
	for name, v := range map[string]int{"max_depth": l.MaxDepth, "max_steps": l.MaxSteps, "max_parallel": l.MaxParallel, "max_nesting": l.MaxNesting, "max_attempts": l.MaxAttempts, "max_step_output_bytes": l.MaxStepOutputBytes, "max_response_bytes": l.MaxResponseBytes, "max_templates": l.MaxTemplates, "max_argument_bytes": l.MaxArgumentBytes, "max_run_bytes": l.MaxRunBytes, "planner_attempts": l.PlannerAttempts, "max_tool_steps": l.MaxToolSteps, "max_concurrent_plans": l.MaxConcurrentPlans, "max_iterations": l.MaxIterations, "max_tool_calls": l.MaxToolCalls, "max_model_calls": l.MaxModelCalls, "max_agent_runs": l.MaxAgentRuns, "plans_per_owner": l.PlansPerOwner, "plans_per_tenant": l.PlansPerTenant, "max_background": l.MaxBackground, "background_queue_depth": l.BackgroundQueueDepth} {
		if v < 0 {
			problems = append(problems, fmt.Sprintf("limits.%s must not be negative", name))
		}
	}
	if r := c.Server.Response; r != "" && r != orchestrate.ResponseCompact && r != orchestrate.ResponseFull {
		problems = append(problems, fmt.Sprintf("server.response must be %q or %q, not %q", orchestrate.ResponseCompact, orchestrate.ResponseFull, r))
	}
	if c.Store.Retention.MaxAge < 0 || c.Store.Retention.MaxRuns < 0 || c.Store.Retention.ConversationMaxAge < 0 || c.Store.Retention.ConversationTurns < 0 {
		problems = append(problems, "store.retention.max_age, max_runs, conversation_max_age and conversation_turns must not be negative")
	}
	if l.IdempotencyTTL < 0 {
		problems = append(problems, "limits.idempotency_ttl must not be negative")
	}
	if l.QueueTimeout < 0 {
		problems = append(problems, "limits.queue_timeout must not be negative")
	}
	if n := l.MaxConcurrentPlans; n > 0 && (l.PlansPerOwner > n || l.PlansPerTenant > n) {
		problems = append(problems, fmt.Sprintf("limits.plans_per_owner and limits.plans_per_tenant must not be above limits.max_concurrent_plans (%d)", n))
	}
	if l.StepTimeout < 0 {
		problems = append(problems, "limits.step_timeout must not be negative")
	}
	if l.PlanTimeout < 0 {
		problems = append(problems, "limits.plan_timeout must not be negative")
	}
	if l.MaxMemoryBytes < 0 {
		problems = append(problems, "limits.max_memory_bytes must not be negative")
	}
	if l.MaxDownstreamResponseBytes < 0 {
		problems = append(problems, "limits.max_downstream_response_bytes must not be negative")
	}
	if c.Server.RateLimit.Burst < 0 {
		problems = append(problems, "server.rate_limit.burst must not be negative")
	}
	for _, g := range c.ClientFinalTools {
		if _, err := path.Match(g, ""); err != nil {
			problems = append(problems, fmt.Sprintf("client_final_tools: %q is not a valid glob (%v); a glob matches tool names with *, ? and [...]", g, err))
		}
	}
	if s := c.Server; s.MaxRequestBytes < 0 || s.MaxRequestDepth < 0 || s.MaxRequestElements < 0 {
		problems = append(problems, "server.max_request_bytes, server.max_request_depth and server.max_request_elements must not be negative")
	}
	if c.Server.ShutdownGrace < 0 {
		problems = append(problems, "server.shutdown_grace must not be negative")
	}
	if t := c.Server.SessionTimeout; t != nil && *t < 0 {
		problems = append(problems, "server.session_timeout must not be negative (0 keeps idle sessions)")
	}
	if s := c.Server; s.MaxSessions < 0 || s.MaxConnections < 0 || s.MaxConnectionsPerClient < 0 {
		problems = append(problems, "server.max_sessions, server.max_connections and server.max_connections_per_client must not be negative")
	}
	if c.Server.HeaderTimeout < 0 || c.Server.BodyTimeout < 0 {
		problems = append(problems, "server.header_timeout and server.body_timeout must not be negative")
	}
	if p := c.Planner; p != nil {
		problems = append(problems, validatePlanner(&p.Config)...)
		problems = append(problems, p.validate()...)
	}
	problems = append(problems, c.Pricing.Validate()...)
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		problems = append(problems, c.Agents[name].Validate(name)...)
		if m := c.Agents[name].Model; m != nil {
			for _, p := range validatePlanner(m) {
				problems = append(problems, "agents."+name+".model: "+strings.TrimPrefix(p, "planner."))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Workflows)) {
		problems = append(problems, c.Workflows[name].Validate(name)...)
		for _, t := range c.Workflows[name].Tenants {
			if _, ok := c.Tenants[t]; !ok {
				problems = append(problems, fmt.Sprintf("workflows.%s.tenants: no tenant %q is configured", name, t))
			}
		}
	}
	problems = append(problems, c.validateIdentity()...)
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		if err := c.MCPServers[name].Validate(name); err != nil {
			problems = append(problems, fmt.Sprintf("mcpServers.%s: %v", name, err))
		}
	}
	slices.Sort(problems)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// validatePlanner checks the planner block; the API key is checked when
// the model is built, since it lives in the environment.
func validatePlanner(p *llm.Config) []string {
	providers := []string{llm.ProviderOpenAI, llm.ProviderAnthropic, llm.ProviderScripted, llm.ProviderSampling}
	var problems []string
	switch p.Provider {
	case llm.ProviderOpenAI, llm.ProviderAnthropic:
		if p.Model == "" {
			problems = append(problems, fmt.Sprintf("planner.model is required for provider %q (for example %q)", p.Provider, map[string]string{llm.ProviderOpenAI: "gpt-4o-mini", llm.ProviderAnthropic: "claude-sonnet-4-5"}[p.Provider]))
		}
	case llm.ProviderScripted:
		if p.Script == "" {
			problems = append(problems, "planner.script is required for provider \"scripted\": a JSON or JSONL file of responses")
		}
	case llm.ProviderSampling:
	case "":
		problems = append(problems, "planner.provider is required: one of "+strings.Join(providers, ", "))
	default:
		msg := fmt.Sprintf("planner.provider %q is unknown: use one of %s", p.Provider, strings.Join(providers, ", "))
		if s := suggest.Closest(p.Provider, providers, 1); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		problems = append(problems, msg)
	}
	if p.MaxTokens < 0 || p.Timeout < 0 {
		problems = append(problems, "planner.max_tokens and planner.timeout must not be negative")
	}
	return problems
}

var yamlLine = regexp.MustCompile(`^yaml: (?:unmarshal errors:\n\s*)?line (\d+): `)

// yamlError turns a YAML error into one that starts with ":line: " (or
// ": " when it has no line), so that the file name can go before it.
func yamlError(err error) error {
	msg := cleanYAMLError(err)
	if msg != "" && msg[0] >= '0' && msg[0] <= '9' {
		return errors.New(":" + msg)
	}
	return errors.New(": " + msg)
}

func cleanYAMLError(err error) string {
	var errs *yaml.LoadErrors
	if errors.As(err, &errs) && len(errs.Errors) > 0 {
		// Values that do not fit their keys: the first one's line leads.
		var b strings.Builder
		for i, e := range errs.Errors {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%d: %s", e.Mark.Line, e.Message)
			default:
				fmt.Fprintf(&b, "; line %d: %s", e.Mark.Line, e.Message)
			}
		}
		return b.String()
	}
	var le *yaml.LoadError
	if errors.As(err, &le) && le.Mark.Line > 0 {
		return fmt.Sprintf("%d: %s", le.Mark.Line, le.Message)
	}
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return m[1] + ": " + strings.TrimSpace(msg[len(m[0]):])
	}
	return strings.TrimPrefix(msg, "yaml: ")
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// expand replaces ${NAME} in every string scalar of n.
func expand(n *yaml.Node, lookup func(string) (string, bool), at string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := expand(c, lookup, at); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expand(c, lookup, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expand(n.Content[i+1], lookup, join(at, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.Tag != "!!str" || !strings.Contains(n.Value, "${") {
			return nil
		}
		var missing string
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := envRef.FindStringSubmatch(m)
			if v, ok := lookup(sub[1]); ok {
				return v
			}
			if sub[2] != "" {
				return sub[2][2:]
			}
			if missing == "" {
				missing = sub[1]
			}
			return m
		})
		if missing != "" {
			return fmt.Errorf(":%d: environment variable %s is not set (used in %s); set it or write ${%s:-default}", n.Line, missing, at, missing)
		}
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			// An unquoted value takes the type of what it expands to:
			// max_request_bytes: ${BYTES} is a number.
			n.Tag = ""
		}
	}
	return nil
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// checkKeys reports the first key of n that t has no field for.
func checkKeys(n *yaml.Node, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			if err := checkKeys(c, t, at); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind == yaml.AliasNode {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return nil
			}
			if hasUnmarshaler(t) {
				return nil
			}
			return fmt.Errorf(":%d: %s must be a mapping of keys, not %s", n.Line, orTop(at), kindName(n))
		}
		if hasUnmarshaler(t) {
			return nil
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				slices.Sort(known)
				msg := fmt.Sprintf(":%d: unknown key %q in %s", k.Line, k.Value, orTop(at))
				if s := suggest.Closest(k.Value, known, 1); len(s) > 0 {
					msg += fmt.Sprintf("; did you mean %q?", s[0])
				} else {
					msg += "; known keys: " + strings.Join(known, ", ")
				}
				return errors.New(msg)
			}
			if err := checkKeys(n.Content[i+1], ft, join(at, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), join(at, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func orTop(at string) string {
	if at == "" {
		return "the configuration"
	}
	return at
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "this"
}

func hasUnmarshaler(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(reflect.TypeFor[yaml.Unmarshaler]()) || pt.Implements(reflect.TypeFor[interface{ UnmarshalYAML(func(any) error) error }]())
}

// yamlFields maps the yaml keys of struct t to their types, following
// inline fields.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}
