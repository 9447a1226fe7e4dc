package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

var noEnv = env(nil)

func mustParse(t *testing.T, src string, lookup func(string) (string, bool)) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(src), lookup)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return c
}

var cmpConfig = cmpopts.IgnoreUnexported(config.Config{})

func TestDefaults(t *testing.T) {
	d := config.Default()
	if got, want := d.EngineLimits(), orchestrate.DefaultLimits(); got != want {
		t.Errorf("default limits = %+v, want %+v", got, want)
	}
	if l := d.Limits; l.MaxBackground != 8 || l.BackgroundQueueDepth != 32 {
		t.Errorf("default background limits: max_background %d, background_queue_depth %d; want 8 and 32", l.MaxBackground, l.BackgroundQueueDepth)
	}
	if d.Server.MaxRequestBytes != 4<<20 || d.Server.ShutdownGrace != 10*time.Second || *d.Server.SessionTimeout != 30*time.Minute || !d.Server.ExposeBuiltinTools() {
		t.Errorf("default server = %+v", d.Server)
	}
	for _, src := range []string{"", "\n", "# nothing\n", "{}", "limits:\n", "limits: {}\nserver: {}\n"} {
		if diff := cmp.Diff(d, mustParse(t, src, noEnv), cmpConfig); diff != "" {
			t.Errorf("Parse(%q) differs from Default() (-want +got):\n%s", src, diff)
		}
	}
}

func TestYAMLAndJSON(t *testing.T) {
	yamlSrc := `
limits:
  max_depth: 2
  max_steps: 20
  step_timeout: 5s
  plan_timeout: 1m
server:
  max_request_bytes: 1048576
  shutdown_grace: 2s
  session_timeout: 0s
  expose_builtins: false
builtins:
  http_request:
    allowed_hosts: [api.example.com, "*.example.org"]
    timeout: 3s
`
	jsonSrc := `{
  "limits": {"max_depth": 2, "max_steps": 20, "step_timeout": "5s", "plan_timeout": "1m"},
  "server": {"max_request_bytes": 1048576, "shutdown_grace": "2s", "session_timeout": "0s", "expose_builtins": false},
  "builtins": {"http_request": {"allowed_hosts": ["api.example.com", "*.example.org"], "timeout": "3s"}}
}`
	y := mustParse(t, yamlSrc, noEnv)
	j := mustParse(t, jsonSrc, noEnv)
	if diff := cmp.Diff(y, j, cmpConfig); diff != "" {
		t.Errorf("YAML and JSON differ (-yaml +json):\n%s", diff)
	}
	l := y.EngineLimits()
	if l.MaxDepth != 2 || l.MaxSteps != 20 || l.StepTimeout != 5*time.Second || l.PlanTimeout != time.Minute {
		t.Errorf("limits = %+v", l)
	}
	if l.MaxParallel != orchestrate.DefaultLimits().MaxParallel {
		t.Errorf("an unset limit did not take its default: max_parallel = %d", l.MaxParallel)
	}
	s := y.Server
	if s.MaxRequestBytes != 1<<20 || s.ShutdownGrace != 2*time.Second || *s.SessionTimeout != 0 || s.ExposeBuiltinTools() {
		t.Errorf("server = %+v", s)
	}
	if h := y.Builtins.HTTP; len(h.AllowedHosts) != 2 || h.Timeout.D() != 3*time.Second {
		t.Errorf("builtins.http_request = %+v", h)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		env       map[string]string
		want      string // a regular expression
	}{
		{"unknown top-level key", "limits:\n  max_steps: 3\nlimit:\n  max_steps: 2\n", nil, `^:3: unknown key "limit" in the configuration; did you mean "limits"\?`},
		{"unknown key in limits", "limits:\n  max_steps: 3\n  max_step: 2\n", nil, `^:3: unknown key "max_step" in limits; did you mean "max_steps"\?`},
		{"unknown key in server", "server:\n  shutdown_grace: 1s\n  max_request_byte: 10\n", nil, `^:3: unknown key "max_request_byte" in server; did you mean "max_request_bytes"\?`},
		{"unknown key in builtins.http_request", "builtins:\n  http_request:\n    allowed_host: [a.example]\n", nil, `^:3: unknown key "allowed_host" in builtins.http_request; did you mean "allowed_hosts"\?`},
		{"unknown key in builtins", "builtins:\n  jq: {}\n", nil, `^:2: unknown key "jq" in builtins`},
		{"unknown key far off", "server:\n  zzzzzzzzzz: 1\n", nil, `^:2: unknown key "zzzzzzzzzz" in server; known keys: .*max_request_bytes`},
		{"unknown key in JSON", "{\n  \"limits\": {\n    \"max_paralel\": 2\n  }\n}", nil, `^:3: unknown key "max_paralel" in limits; did you mean "max_parallel"\?`},
		{"limits not a mapping", "limits: 5\n", nil, `^:1: limits must be a mapping of keys, not the value "5"`},
		{"server a list", "server:\n  - 1\n", nil, `^:2: server must be a mapping of keys, not a list`},
		{"wrong type", "limits:\n  max_steps: many\n", nil, `^:2: .*many`},
		{"missing env", "builtins:\n  http_request:\n    allowed_hosts:\n      - ${API_HOST}\n", nil, `^:4: environment variable API_HOST is not set \(used in builtins.http_request.allowed_hosts\[0\]\); set it or write \$\{API_HOST:-default\}`},
		{"missing env in server", "server:\n  shutdown_grace: ${GRACE}\n", nil, `^:2: environment variable GRACE is not set \(used in server.shutdown_grace\)`},
		{"negative limit", "limits:\n  max_steps: -1\n", nil, `limits.max_steps must not be negative`},
		{"negative background limits", "limits:\n  max_background: -1\n  background_queue_depth: -2\n", nil, `limits.background_queue_depth must not be negative; limits.max_background must not be negative`},
		{"negative limits", "limits:\n  max_parallel: -2\n  max_depth: -1\n", nil, `limits.max_depth must not be negative; limits.max_parallel must not be negative`},
		{"negative timeout", "limits:\n  step_timeout: -1s\n", nil, `limits.step_timeout must not be negative`},
		{"negative request limit", "server:\n  max_request_bytes: -1\n", nil, `server.max_request_bytes, server.max_request_depth and server.max_request_elements must not be negative`},
		{"negative grace", "server:\n  shutdown_grace: -1s\n", nil, `server.shutdown_grace must not be negative`},
		{"negative session timeout", "server:\n  session_timeout: -1s\n", nil, `server.session_timeout must not be negative`},
		{"malformed YAML", "limits:\n  max_steps: [1\n", nil, `^:\d+: did not find expected`},
		{"unknown key in a server", "mcpServers:\n  d:\n    url: http://127.0.0.1:9/mcp\n    forward_id: false\n", nil, `^:4: unknown key "forward_id" in mcpServers.d; did you mean "forward_ids"\?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.src), env(tc.env))
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tc.src)
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("error %q does not match %s", err, tc.want)
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	src := `
builtins:
  http_request:
    allowed_hosts: ["${HOST}", "${OTHER:-fallback.example}", "api.${DOMAIN}", "$$literal", "${SET_EMPTY:-unused}"]
server:
  shutdown_grace: ${GRACE:-3s}
  max_request_bytes: ${BYTES}
`
	c := mustParse(t, src, env(map[string]string{"HOST": "a.example", "DOMAIN": "example.net", "BYTES": "2048", "SET_EMPTY": ""}))
	want := []string{"a.example", "fallback.example", "api.example.net", "$$literal", ""}
	if diff := cmp.Diff(want, c.Builtins.HTTP.AllowedHosts); diff != "" {
		t.Errorf("allowed_hosts (-want +got):\n%s", diff)
	}
	if c.Server.ShutdownGrace != 3*time.Second || c.Server.MaxRequestBytes != 2048 {
		t.Errorf("server = %+v; want shutdown_grace 3s from the default and max_request_bytes 2048 from the environment", c.Server)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(p, []byte("limits:\n  max_steps: 5\n  max_stepz: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(p)
	if err == nil || err.Error() != p+`:3: unknown key "max_stepz" in limits; did you mean "max_steps"?` {
		t.Errorf("Load error = %v", err)
	}
	if err := os.WriteFile(p, []byte("limits:\n  max_steps: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path() != p || c.Limits.MaxSteps != 5 {
		t.Errorf("Load = %+v, path %q", c.Limits, c.Path())
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml")); err == nil || !regexp.MustCompile(`missing\.yaml`).MatchString(err.Error()) {
		t.Errorf("Load of a missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := config.Load(empty); err != nil || c.Limits.MaxSteps != orchestrate.DefaultLimits().MaxSteps {
		t.Errorf("Load of an empty file: %v, %+v", err, c)
	}
}

func TestEnvExpansionKeepsStrings(t *testing.T) {
	c := mustParse(t, "builtins:\n  http_request:\n    allowed_hosts:\n      - ${A}\n      - \"${B}\"\n", env(map[string]string{"A": "true", "B": "42"}))
	if diff := cmp.Diff([]string{"true", "42"}, c.Builtins.HTTP.AllowedHosts); diff != "" {
		t.Errorf("allowed_hosts (-want +got):\n%s", diff)
	}
}

// TestIdentityExample parses the README's example of tokens, a JWT and
// tenants, and refuses what it must.
func TestIdentityExample(t *testing.T) {
	const example = `
mcpServers:
  search: {command: search-server}
server:
  auth:
    tokens:
      - {name: alice, token_env: ALICE_TOKEN}
      - {name: ci, token_file: /run/secrets/ci-token}
    jwt:
      issuer: https://auth.example.com
      audience: https://orchestra.example.com/mcp
      jwks_url: https://auth.example.com/.well-known/jwks.json
      required_scopes: [orchestra:run]
tenants:
  research:
    match: {tokens: [alice]}
    tools: ["render", "json_query", "filesystem__read_*"]
    limits: {max_steps: 6, plan_timeout: 1m}
    rate_limit: {requests_per_second: 20, burst: 40}
  partners:
    match: {claims: {org: partner-co}}
    servers: [search]
    planning_enabled: false
store:
  url: postgres://orchestra@db.internal:5432/orchestra
  lease: 30s
`
	c, err := config.Parse([]byte(example), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.Tenants["research"].RateLimit; rl == nil || rl.RequestsPerSecond != 20 || rl.Burst != 40 || c.Tenants["partners"].RateLimit != nil {
		t.Errorf("tenants' rate limits: %+v, %+v", rl, c.Tenants["partners"].RateLimit)
	}
	if c.Tenants["partners"].Planning() || !c.Tenants["research"].Planning() || c.Store.Path != c.Store.URL || c.Store.Lease.D() != 30*time.Second {
		t.Errorf("parsed %+v %+v", c.Tenants, c.Store)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"tenants: {a: {match: {tokens: [nobody]}}}", "not in server.auth.tokens"},
		{"server: {auth: {tokens: [{name: a, token_env: A}]}}\ntenants: {a: {match: {tokens: [a]}, limits: {max_steps: 1000}}}", "may only lower"},
		{"server: {auth: {tokens: [{name: a, token_env: A}]}}\ntenants: {a: {match: {tokens: [a]}, limits: {max_background: 33}}}", "tenants.a.limits.max_background is 33, above the global 32"},
		{"limits: {background_queue_depth: 4}\nserver: {auth: {tokens: [{name: a, token_env: A}]}}\ntenants: {a: {match: {tokens: [a]}, limits: {max_background: 5}}}", "max_background is 5, above the global 4"},
		{"server: {auth: {tokens: [{name: a, token_env: A}]}}\ntenants: {a: {match: {tokens: [a]}, limits: {max_background: -1}}}", "tenants.a.limits.max_background must not be negative"},
		{"tenants: {a: {match: {claims: {org: x}}}}", "needs server.auth.jwt"},
		{"server: {auth: {jwt: {issuer: x}}}", "needs issuer, audience and jwks_url"},
		{"store: {url: mysql://x}", "postgres://"},
		{"server: {auth: {tokens: [{name: a}]}}", "exactly one of token_env and token_file"},
		{"server: {auth: {tokens: [{name: a, token_env: A}]}}\ntenants: {a: {match: {tokens: [a]}, rate_limit: {burst: 5}}}", "tenants.a.rate_limit.requests_per_second must be positive"},
		{"server: {auth: {tokens: [{name: a, token_env: A}]}}\ntenants: {a: {match: {tokens: [a]}, rate_limit: {requests_per_second: 1, burst: -1}}}", "tenants.a.rate_limit.burst must not be negative"},
	} {
		if _, err := config.Parse([]byte(bad.yaml), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.yaml, err, bad.want)
		}
	}
}

// TestInvalidClientFinalGlob: a glob of client_final_tools that cannot
// match anything was accepted silently; it is refused at load with the
// reason.
func TestInvalidClientFinalGlob(t *testing.T) {
	_, err := config.Parse([]byte("client_final_tools: [\"edit_*\", \"[unclosed\"]\n"), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), `client_final_tools: "[unclosed" is not a valid glob`) || !strings.Contains(err.Error(), "syntax error in pattern") {
		t.Fatalf("err = %v, want the bad glob and why", err)
	}
	if _, err := config.Parse([]byte("client_final_tools: [\"edit_*\", \"fs__write?\"]\n"), func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("valid globs: %v", err)
	}
}

// TestLoadDevZero: --config /dev/zero read until memory ran out; reading
// stops at MaxFileBytes with an error that says so.
func TestLoadDevZero(t *testing.T) {
	_, err := config.Load("/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "larger than") || !strings.Contains(err.Error(), "/dev/zero") {
		t.Fatalf("err = %v, want /dev/zero refused as larger than the limit", err)
	}
}

// TestForwardIDs: a server's forward_ids reads as it is written, and is
// true when left out.
func TestForwardIDs(t *testing.T) {
	c, err := config.Parse([]byte("mcpServers:\n  quiet:\n    url: http://127.0.0.1:9/mcp\n    forward_ids: false\n  loud:\n    url: http://127.0.0.1:9/mcp\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.MCPServers["quiet"].ForwardsIDs() || !c.MCPServers["loud"].ForwardsIDs() {
		t.Errorf("forward_ids: quiet %v, loud %v; want false, true", c.MCPServers["quiet"].ForwardsIDs(), c.MCPServers["loud"].ForwardsIDs())
	}
}
