package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	template "github.com/DataDog/datadog-agent/pkg/template/text"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/internal/schemaload"
	"github.com/orchestra-mcp/orchestra/llm"
)

// Config is one agent of the agents block of the configuration file.
type Config struct {
	// Description tells models (a planner, a client) what the agent is for.
	Description string `yaml:"description" json:"description"`
	// Instructions are the agent's system prompt.
	Instructions string `yaml:"instructions" json:"instructions"`
	// Model is the agent's model, in the planner block's shape. Without
	// it the host chooses at each call (Options.ModelFor): the caller's
	// tenant's planner model, the planner's, or the client's through
	// sampling.
	Model *llm.Config `yaml:"model,omitempty" json:"model,omitempty"`
	// Tools are globs over the catalog's tool names (path.Match syntax,
	// e.g. "filesystem__read_*"); the agent may call only the tools they
	// match. None by default.
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// MaxToolSteps bounds the model turns that may call tools; default 8.
	MaxToolSteps int `yaml:"max_tool_steps,omitempty" json:"max_tool_steps,omitempty"`
	// OutputSchema, when set, is the JSON Schema of the agent's final
	// answer, which must then be JSON matching it: result.data.
	OutputSchema map[string]any `yaml:"output_schema,omitempty" json:"output_schema,omitempty"`
	// Actions are named tasks of the agent, chosen with the request's action.
	Actions map[string]Action `yaml:"actions,omitempty" json:"actions,omitempty"`
	// Expose also lists the agent's tool on orchestra's own MCP tool list.
	Expose bool `yaml:"expose,omitempty" json:"expose,omitempty"`
}

// Action is a named task of an agent.
type Action struct {
	// Description says what the action does.
	Description string `yaml:"description" json:"description"`
	// Prompt is a Go text/template over the request's parameters (with):
	// "Review {{.file}} for {{.concern}}". It is sent before the request's
	// user_query, if any.
	Prompt string `yaml:"prompt" json:"prompt"`
	// InputSchema, when set, is the JSON Schema the parameters must match.
	InputSchema map[string]any `yaml:"input_schema,omitempty" json:"input_schema,omitempty"`
}

// DefaultMaxToolSteps is an agent's max_tool_steps when it sets none.
const DefaultMaxToolSteps = 8

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,57}$`)

// Validate reports the problems of the agent called name, each naming
// where it is (agents.<name>.<field>).
func (c Config) Validate(name string) []string {
	at := "agents." + name
	var problems []string
	if !namePattern.MatchString(name) {
		problems = append(problems, fmt.Sprintf("%s: an agent's name matches [A-Za-z0-9_-]{1,57} (its tool is agent__<name>)", at))
	}
	if strings.TrimSpace(c.Description) == "" {
		problems = append(problems, at+".description is required: it tells models what the agent is for")
	}
	if c.MaxToolSteps < 0 {
		problems = append(problems, at+".max_tool_steps must not be negative")
	}
	for _, g := range c.Tools {
		if _, err := path.Match(g, ""); err != nil {
			problems = append(problems, fmt.Sprintf("%s.tools: %q is not a valid glob: %v", at, g, err))
		}
	}
	if c.OutputSchema != nil {
		if _, err := schemaOf(at+".output_schema", c.OutputSchema); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, an := range slices.Sorted(maps.Keys(c.Actions)) {
		a := c.Actions[an]
		aat := at + ".actions." + an
		if !namePattern.MatchString(an) {
			problems = append(problems, fmt.Sprintf("%s: an action's name matches [A-Za-z0-9_-]{1,57}", aat))
		}
		if _, err := template.New(an).Option("missingkey=zero").Parse(a.Prompt); err != nil {
			problems = append(problems, fmt.Sprintf("%s.prompt: %v", aat, err))
		}
		if a.InputSchema != nil {
			if _, err := schemaOf(aat+".input_schema", a.InputSchema); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	return problems
}

// schemaOf loads a schema written in the configuration at source
// (agents.<name>.output_schema) through the schema loader.
func schemaOf(source string, m map[string]any) (*jsonschema.Schema, error) {
	return schemaload.Load(source, m, schemaload.DefaultLimits())
}

// allows reports whether the globs match name.
func allows(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// ConfigVersion is the version of an agent's configuration block: the
// first 16 hex digits of the SHA-256 of its JSON encoding (object keys
// sorted), so that it changes when and only when the block does.
func ConfigVersion(c Config) string {
	data, err := json.Marshal(c)
	if err != nil {
		// Only a value JSON cannot encode (a NaN in a schema) fails; its
		// text stands in.
		data = fmt.Appendf(nil, "%#v", c)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
