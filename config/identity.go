package config

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/duration"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
)

// NamedToken is a static bearer token with a name: the name is the user id
// of the runs its holder starts, and what tenants match. The token itself
// is read from the environment or a file, never from the configuration.
type NamedToken struct {
	// Name identifies the token's holder, e.g. alice or ci.
	Name string `yaml:"name" json:"name"`
	// TokenEnv names the environment variable holding the token.
	TokenEnv string `yaml:"token_env,omitempty" json:"token_env,omitempty"`
	// TokenFile is a file holding the token (surrounding space ignored).
	TokenFile string `yaml:"token_file,omitempty" json:"token_file,omitempty"`
}

// Value reads the token from its variable (looked up with lookup, e.g.
// os.LookupEnv) or its file.
func (nt NamedToken) Value(lookup func(string) (string, bool)) (string, error) {
	var v string
	if nt.TokenEnv != "" {
		val, ok := lookup(nt.TokenEnv)
		if !ok {
			return "", fmt.Errorf("server.auth.tokens: the token of %s names %s, which is not set", nt.Name, nt.TokenEnv)
		}
		v = val
	} else {
		data, err := ReadFile(nt.TokenFile)
		if err != nil {
			return "", fmt.Errorf("server.auth.tokens: the token of %s: %w", nt.Name, err)
		}
		v = string(data)
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return "", fmt.Errorf("server.auth.tokens: the token of %s is empty", nt.Name)
	}
	return v, nil
}

// JWT makes the HTTP transport an OAuth 2.1 resource server, as the MCP
// authorization specification asks: requests carry access tokens (JWTs)
// issued by Issuer for Audience, checked against the issuer's keys at
// JWKSURL.
type JWT struct {
	// Issuer is the authorization server; tokens must carry it as iss.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Audience is this server's resource identifier (its URL, e.g.
	// https://orchestra.example.com/mcp); tokens must name it in aud.
	Audience string `yaml:"audience" json:"audience"`
	// JWKSURL is where the issuer publishes its signing keys.
	JWKSURL string `yaml:"jwks_url" json:"jwks_url"`
	// RequiredScopes must all be in a token's scope claim; a token without
	// them is refused with 403.
	RequiredScopes []string `yaml:"required_scopes,omitempty" json:"required_scopes,omitempty"`
	// Leeway tolerates clock skew on exp and nbf. Default 30s.
	Leeway duration.Duration `yaml:"leeway,omitempty" json:"leeway,omitempty"`
}

// Tenant is one group of callers with its own tools, limits and records.
type Tenant struct {
	// Match says which callers belong to the tenant.
	Match TenantMatch `yaml:"match" json:"match"`
	// Tools are globs (path.Match) of the tools the tenant may call and
	// list, e.g. "filesystem__read_*"; empty means every tool of Servers,
	// or every tool when Servers is empty too.
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// Servers are downstream servers (mcpServers keys) whose tools the
	// tenant may call, in addition to Tools.
	Servers []string `yaml:"servers,omitempty" json:"servers,omitempty"`
	// Limits lower the global limits for the tenant's runs; a limit above
	// the global one is an error.
	Limits TenantLimits `yaml:"limits" json:"limits"`
	// Instructions are the tenant's own layer of instructions, after the
	// operator's (planner.instructions) and before the request's
	// (context.instructions) in the planning, answering and agents'
	// requests of its callers. At most orchestrate.MaxInstructionBytes.
	Instructions string `yaml:"instructions,omitempty" json:"instructions,omitempty"`
	// MCPServers are downstream servers of the tenant's own, in the shape
	// of the top-level mcpServers: only its callers list, plan with and
	// call their tools, which are named <server>__<tool> like any
	// downstream tool. Each starts when one of its callers first needs
	// the tenant's tools, and its calls count in the tenant's limits.
	MCPServers map[string]mcpserver.ServerConfig `yaml:"mcpServers,omitempty" json:"mcpServers,omitempty"`
	// Planner replaces the global planner for the tenant's prompts.
	Planner *llm.Config `yaml:"planner,omitempty" json:"planner,omitempty"`
	// PlanningEnabled false refuses the tenant's prompts: it must send plans.
	PlanningEnabled *bool `yaml:"planning_enabled,omitempty" json:"planning_enabled,omitempty"`
	// RateLimit caps the HTTP requests of all the tenant's callers
	// together (every token and JWT subject it matches), on top of each
	// caller's own server.rate_limit. Unset means no tenant-wide limit;
	// a burst of 0 means the rate rounded up.
	RateLimit *RateLimit `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty"`
}

// TenantMatch recognises a tenant's callers: by the name of their static
// token, or by the claims of their JWT (every claim listed must equal its
// value whole; a list claim must hold it as an element, and the
// space-separated string of scope or scp as one of its members).
type TenantMatch struct {
	Tokens []string          `yaml:"tokens,omitempty" json:"tokens,omitempty"`
	Claims map[string]string `yaml:"claims,omitempty" json:"claims,omitempty"`
}

// TenantLimits are the limits a tenant may lower.
type TenantLimits struct {
	orchestrate.Limits `yaml:",inline"`
	// MaxConcurrentPlans caps the tenant's orchestrations running at once.
	MaxConcurrentPlans int `yaml:"max_concurrent_plans" json:"max_concurrent_plans"`
	// MaxToolSteps bounds the model turns of the tenant's agents and of
	// its reactive fallback: an agent whose own max_tool_steps is lower
	// keeps it. It may not be above the global limits.max_tool_steps.
	MaxToolSteps int `yaml:"max_tool_steps" json:"max_tool_steps"`
	// MaxBackground caps the background runs the tenant's callers hold
	// together; 0 leaves them bounded by limits.background_queue_depth.
	MaxBackground int `yaml:"max_background" json:"max_background"`
}

// Planning reports whether the tenant may send prompts.
func (t Tenant) Planning() bool { return t.PlanningEnabled == nil || *t.PlanningEnabled }

// validateIdentity checks server.auth's named tokens and JWT, the tenants
// and store.url.
func (c *Config) validateIdentity() []string {
	var problems []string
	a := c.Server.Auth
	names := map[string]bool{}
	for i, t := range a.Tokens {
		at := fmt.Sprintf("server.auth.tokens[%d]", i)
		switch {
		case t.Name == "":
			problems = append(problems, at+".name is required")
		case names[t.Name]:
			problems = append(problems, fmt.Sprintf("%s.name %q is used twice", at, t.Name))
		}
		names[t.Name] = true
		if (t.TokenEnv == "") == (t.TokenFile == "") {
			problems = append(problems, at+" needs exactly one of token_env and token_file")
		}
	}
	if j := a.JWT; j != nil {
		if j.Issuer == "" || j.Audience == "" || j.JWKSURL == "" {
			problems = append(problems, "server.auth.jwt needs issuer, audience and jwks_url")
		}
		if u, err := url.Parse(j.JWKSURL); j.JWKSURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http")) {
			problems = append(problems, "server.auth.jwt.jwks_url must be an http(s) URL")
		}
		if j.Leeway < 0 {
			problems = append(problems, "server.auth.jwt.leeway must not be negative")
		}
	}
	servers := map[string]string{} // server name -> where it is configured
	for s := range c.MCPServers {
		servers[s] = "mcpServers"
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		t := c.Tenants[name]
		at := "tenants." + name
		if len(t.Match.Tokens) == 0 && len(t.Match.Claims) == 0 {
			problems = append(problems, at+".match needs tokens or claims")
		}
		for _, tok := range t.Match.Tokens {
			if !names[tok] {
				problems = append(problems, fmt.Sprintf("%s.match.tokens names %q, which is not in server.auth.tokens", at, tok))
			}
		}
		if len(t.Match.Claims) > 0 && a.JWT == nil {
			problems = append(problems, at+".match.claims needs server.auth.jwt")
		}
		for _, g := range t.Tools {
			if _, err := path.Match(g, ""); err != nil {
				problems = append(problems, fmt.Sprintf("%s.tools: bad glob %q", at, g))
			}
		}
		for _, s := range t.Servers {
			if _, ok := c.MCPServers[s]; !ok {
				problems = append(problems, fmt.Sprintf("%s.servers names %q, which is not in mcpServers (a tenant's own servers, in its mcpServers, need no entry)", at, s))
			}
		}
		problems = append(problems, c.checkTenantLimits(at, t.Limits)...)
		problems = append(problems, checkInstructions(at+".instructions", t.Instructions)...)
		for _, s := range slices.Sorted(maps.Keys(t.MCPServers)) {
			if err := t.MCPServers[s].Validate(s); err != nil {
				problems = append(problems, fmt.Sprintf("%s.mcpServers.%s: %v", at, s, err))
			}
			if owner, ok := servers[s]; ok {
				problems = append(problems, fmt.Sprintf("%s.mcpServers.%s: the name is taken by %s; a server's name prefixes its tools' names, so each must be unique", at, s, owner))
			}
			servers[s] = at + ".mcpServers"
		}
		if rl := t.RateLimit; rl != nil {
			if rl.RequestsPerSecond <= 0 {
				problems = append(problems, at+".rate_limit.requests_per_second must be positive: leave rate_limit out for no tenant-wide limit")
			}
			if rl.Burst < 0 {
				problems = append(problems, at+".rate_limit.burst must not be negative")
			}
		}
		if t.Planner != nil {
			for _, p := range validatePlanner(t.Planner) {
				problems = append(problems, at+"."+p)
			}
		}
	}
	if c.Store.URL != "" && c.Store.Path != "" {
		problems = append(problems, "store.url and store.path are exclusive: url is a PostgreSQL database, path a SQLite file")
	}
	if u := c.Store.URL; u != "" && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		problems = append(problems, "store.url must be a postgres:// URL")
	}
	if c.Store.Lease < 0 {
		problems = append(problems, "store.lease must not be negative")
	}
	return problems
}

// checkTenantLimits refuses a tenant limit that is negative or above the
// global one (which has its default when the file leaves it out).
func (c *Config) checkTenantLimits(at string, tl TenantLimits) []string {
	var problems []string
	g := c.Limits
	g.applyDefaults()
	l := tl.Limits
	check := func(name string, v, global int64) {
		switch {
		case v < 0:
			problems = append(problems, fmt.Sprintf("%s.limits.%s must not be negative", at, name))
		case v > global && global > 0:
			problems = append(problems, fmt.Sprintf("%s.limits.%s is %d, above the global %d: a tenant's limits may only lower the global ones", at, name, v, global))
		}
	}
	check("max_depth", int64(l.MaxDepth), int64(g.MaxDepth))
	check("max_steps", int64(l.MaxSteps), int64(g.MaxSteps))
	check("max_parallel", int64(l.MaxParallel), int64(g.MaxParallel))
	check("max_nesting", int64(l.MaxNesting), int64(g.MaxNesting))
	check("max_attempts", int64(l.MaxAttempts), int64(g.MaxAttempts))
	check("step_timeout", int64(l.StepTimeout), int64(g.StepTimeout))
	check("plan_timeout", int64(l.PlanTimeout), int64(g.PlanTimeout))
	check("max_step_output_bytes", int64(l.MaxStepOutputBytes), int64(g.MaxStepOutputBytes))
	check("max_response_bytes", int64(l.MaxResponseBytes), int64(g.MaxResponseBytes))
	check("max_templates", int64(l.MaxTemplates), int64(g.MaxTemplates))
	check("max_argument_bytes", int64(l.MaxArgumentBytes), int64(g.MaxArgumentBytes))
	check("max_run_bytes", int64(l.MaxRunBytes), int64(g.MaxRunBytes))
	check("max_iterations", int64(l.MaxIterations), int64(g.MaxIterations))
	check("max_tool_calls", int64(l.MaxToolCalls), int64(g.MaxToolCalls))
	check("max_model_calls", int64(l.MaxModelCalls), int64(g.MaxModelCalls))
	check("max_agent_runs", int64(l.MaxAgentRuns), int64(g.MaxAgentRuns))
	check("max_concurrent_plans", int64(tl.MaxConcurrentPlans), int64(g.MaxConcurrentPlans))
	check("max_tool_steps", int64(tl.MaxToolSteps), int64(g.MaxToolSteps))
	check("max_background", int64(tl.MaxBackground), int64(g.BackgroundQueueDepth))
	if l.MaxMemoryBytes != 0 {
		problems = append(problems, at+".limits.max_memory_bytes cannot be set: it bounds the whole process, not a tenant's runs")
	}
	return problems
}

// StoreLocation is where the execution records live: store.url when set,
// else store.path.
func (s Store) StoreLocation() string {
	if s.URL != "" {
		return s.URL
	}
	return s.Path
}
