package mcpserver

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/duration"
)

// ServerConfig is one entry of the mcpServers block of the configuration
// file. It has the shape of Claude Desktop's entries, so users can paste
// theirs, plus orchestra's own keys.
//
// A stdio server sets Command (and optionally Args, Env, Cwd); a Streamable
// HTTP server sets URL (and optionally Headers). Exactly one of the two.
type ServerConfig struct {
	// Command is the executable of a stdio server, looked up in PATH.
	Command string `json:"command,omitempty" yaml:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `json:"args,omitempty" yaml:"args,omitempty"`
	// Env sets variables of the command's environment, which otherwise
	// holds only a few of orchestra's own (PATH, HOME, the user, shell,
	// terminal, temporary directory, time zone, locale and XDG
	// directories; see BaseEnv) and those InheritEnv names.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// InheritEnv names more variables of orchestra's environment to pass
	// to the command: names, or patterns such as "AWS_*"; ["*"] passes
	// the whole environment, secrets included.
	InheritEnv []string `json:"inherit_env,omitempty" yaml:"inherit_env,omitempty"`
	// Cwd is the command's working directory; empty means orchestra's.
	Cwd string `json:"cwd,omitempty" yaml:"cwd,omitempty"`

	// URL is the endpoint of a Streamable HTTP server.
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
	// Headers are sent with every HTTP request, e.g. Authorization.
	// Their values are never logged.
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`

	// Tools, when not empty, lists the only downstream tools (by their
	// names on the server) that are loaded.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	// ExcludeTools lists downstream tools (by their names on the server)
	// that are not loaded.
	ExcludeTools []string `json:"exclude_tools,omitempty" yaml:"exclude_tools,omitempty"`
	// Expose says whether the server's tools are also listed directly to
	// orchestra's own clients, besides being callable from plans. Nil
	// means true.
	Expose *bool `json:"expose,omitempty" yaml:"expose,omitempty"`
	// Timeout bounds connecting to the server and is the default deadline
	// of a call that has none. Zero means the manager's defaults.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Disabled servers are not started.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`
	// ForwardIDs says whether each call to the server carries the ids of
	// the request and the step that make it in its _meta (the caller's
	// request id, context id, user id and tenant, the exec id and the
	// step id: toolcontext.CallIDs). Nil means true. Depth and
	// traceparent are sent either way; credentials never are.
	ForwardIDs *bool `json:"forward_ids,omitempty" yaml:"forward_ids,omitempty"`
}

// ForwardsIDs reports whether calls to the server carry the request's
// and the step's ids (ForwardIDs, default true).
func (c ServerConfig) ForwardsIDs() bool { return c.ForwardIDs == nil || *c.ForwardIDs }

// ServerNamePattern is what a server name must match. Catalog names are
// <server>__<tool>, so a server name may not itself contain "__", and it
// leaves room for a tool name within the catalog's 64 characters.
var ServerNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Validate reports what is wrong with the configuration of the server
// called name, naming every problem at once. A nil error means the server
// can be started.
func (c ServerConfig) Validate(name string) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	switch {
	case name == "":
		add("the server name is empty")
	case !ServerNamePattern.MatchString(name):
		add("server name %q must be 1 to 32 letters, digits, '_' or '-'", name)
	case strings.Contains(name, "__"):
		add("server name %q must not contain \"__\": it separates the server from the tool in catalog names", name)
	}
	switch {
	case c.Command == "" && c.URL == "":
		add(`set "command" (a stdio server) or "url" (a Streamable HTTP server)`)
	case c.Command != "" && c.URL != "":
		add(`set only one of "command" and "url"`)
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("url %q must be an absolute http or https URL", c.URL)
		}
		if len(c.Args) > 0 || len(c.Env) > 0 || len(c.InheritEnv) > 0 || c.Cwd != "" {
			add(`"args", "env", "inherit_env" and "cwd" apply to stdio servers only; this server has a "url"`)
		}
	case c.Command != "":
		if len(c.Headers) > 0 {
			add(`"headers" apply to HTTP servers only; this server has a "command"`)
		}
	}
	if c.Timeout < 0 {
		add("timeout must not be negative")
	}
	for _, p := range c.InheritEnv {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			add("inherit_env: %q is not a variable name or pattern", p)
		}
	}
	if len(c.Tools) > 0 && len(c.ExcludeTools) > 0 {
		for _, t := range c.ExcludeTools {
			for _, in := range c.Tools {
				if t == in {
					add("tool %q is both included and excluded", t)
				}
			}
		}
	}
	if len(problems) > 0 {
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("server %s: %s", name, strings.Join(problems, "; "))
	}
	return nil
}

// Secrets returns the values of the configuration that must not appear in
// logs, messages or records: the environment values and headers given to
// the server, and the credentials and query values of its URL.
func (c ServerConfig) Secrets() []string {
	var out []string
	for _, v := range c.Env {
		out = append(out, v)
	}
	for _, v := range c.Headers {
		out = append(out, v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			out = append(out, strings.TrimSpace(tok))
		}
	}
	if u, err := url.Parse(c.URL); err == nil && c.URL != "" {
		if u.User != nil {
			out = append(out, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				out = append(out, p, url.QueryEscape(p))
			}
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				out = append(out, v, url.QueryEscape(v))
			}
		}
	}
	return out
}

// exposed reports whether Expose is unset or true.
func (c ServerConfig) exposed() bool { return c.Expose == nil || *c.Expose }

// transport names the kind of server: "stdio" or "http".
func (c ServerConfig) transport() string {
	if c.URL != "" {
		return "http"
	}
	return "stdio"
}

// wants reports whether the downstream tool called tool passes the
// include and exclude lists.
func (c ServerConfig) wants(tool string) bool {
	for _, t := range c.ExcludeTools {
		if t == tool {
			return false
		}
	}
	if len(c.Tools) == 0 {
		return true
	}
	for _, t := range c.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// Duration is a duration written as "30s" or as a number of milliseconds.
type Duration = duration.Duration
