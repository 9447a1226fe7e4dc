package llm

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/duration"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Provider names accepted in [Config].Provider.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderScripted  = "scripted"
	ProviderSampling  = "sampling"
)

// Defaults applied by [New].
const (
	DefaultMaxRetries = 2
	DefaultTimeout    = 120 * time.Second
	// DefaultMaxTokens is used where a provider requires a limit
	// (Anthropic, MCP sampling) and none is configured.
	DefaultMaxTokens = 4096
	// DefaultOpenAIKeyEnv and DefaultAnthropicKeyEnv name the environment
	// variables the key is read from when Config.APIKeyEnv is empty.
	DefaultOpenAIKeyEnv    = "OPENAI_API_KEY"
	DefaultAnthropicKeyEnv = "ANTHROPIC_API_KEY"
)

// Config selects and configures a model provider. It is the `planner` block
// of the configuration file.
type Config struct {
	// Provider is "openai" (any OpenAI-compatible Chat Completions endpoint),
	// "anthropic", "scripted" or "sampling".
	Provider string `json:"provider" yaml:"provider"`
	// Model is the provider's model name, e.g. "gpt-4o-mini" or
	// "claude-sonnet-4-5". Required for openai and anthropic.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// BaseURL points an SDK provider at another endpoint: Ollama
	// ("http://localhost:11434/v1"), vLLM, llama.cpp, LM Studio, OpenRouter,
	// or a proxy.
	BaseURL string `json:"base_url,omitempty" yaml:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the API key
	// (default OPENAI_API_KEY or ANTHROPIC_API_KEY). The key itself never
	// appears in the configuration. For openai, a missing key is allowed
	// when BaseURL is set, since local servers need none.
	APIKeyEnv string `json:"api_key_env,omitempty" yaml:"api_key_env,omitempty"`
	// MaxTokens caps each answer unless the request sets its own cap.
	MaxTokens int `json:"max_tokens,omitempty" yaml:"max_tokens,omitempty"`
	// Temperature is the sampling temperature unless the request sets one.
	Temperature *float64 `json:"temperature,omitempty" yaml:"temperature,omitempty"`
	// Timeout bounds one Generate call, the provider's retries included
	// (default 120s).
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// MaxRetries is how often the SDK providers retry a rate-limited,
	// timed-out or failed request, honouring Retry-After (default 2;
	// negative means never).
	MaxRetries int `json:"max_retries,omitempty" yaml:"max_retries,omitempty"`
	// Script is the path of the scripted provider's responses (JSON array
	// or JSON Lines).
	Script string `json:"script,omitempty" yaml:"script,omitempty"`
	// Headers are extra HTTP headers sent with every request
	// (e.g. OpenRouter's HTTP-Referer).
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
	// MaxResponseBytes caps what is read of one answer of the openai and
	// anthropic providers: an unstreamed response body, or a streamed
	// answer's text and tool-call arguments (its event stream may be 16
	// times larger, for the events' own fields). Default 8 MiB.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty" yaml:"max_response_bytes,omitempty"`
}

// Options carries what a provider needs from its host rather than from the
// configuration file.
type Options struct {
	// Logger receives debug logs of calls; nil discards them.
	Logger *slog.Logger
	// HTTPClient is used by the SDK providers; nil means a default client.
	HTTPClient *http.Client
	// Getenv reads environment variables; nil means [os.Getenv].
	Getenv func(string) string
	// Session is the client session the "sampling" provider samples through.
	Session *mcp.ServerSession
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o Options) getenv(name string) string {
	if o.Getenv == nil {
		return os.Getenv(name)
	}
	return o.Getenv(name)
}

// New returns the model cfg describes.
//
// Errors name what is missing: the provider, the model, the environment
// variable that should hold the key, the script file, or the session.
func New(cfg Config, opts Options) (Model, error) {
	switch strings.ToLower(strings.TrimSpace(cfg.Provider)) {
	case ProviderOpenAI:
		return NewOpenAI(cfg, opts)
	case ProviderAnthropic:
		return NewAnthropic(cfg, opts)
	case ProviderScripted:
		if cfg.Script == "" {
			return nil, fmt.Errorf("planner provider %q needs a script: set planner.script to a JSON or JSONL file of responses", cfg.Provider)
		}
		return LoadScript(cfg.Script)
	case ProviderSampling:
		if opts.Session == nil {
			return nil, fmt.Errorf("planner provider %q needs a client session that supports sampling; use NewSampling with the request's session", cfg.Provider)
		}
		return NewSamplingWithOptions(opts.Session, SamplingOptions{MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, Timeout: cfg.Timeout.D(), Logger: opts.Logger}), nil
	case "":
		return nil, fmt.Errorf("no planner provider configured: set planner.provider to one of %q, %q, %q or %q",
			ProviderOpenAI, ProviderAnthropic, ProviderScripted, ProviderSampling)
	default:
		return nil, fmt.Errorf("unknown planner provider %q: want one of %q, %q, %q or %q",
			cfg.Provider, ProviderOpenAI, ProviderAnthropic, ProviderScripted, ProviderSampling)
	}
}

func (c Config) maxRetries() int {
	switch {
	case c.MaxRetries < 0:
		return 0
	case c.MaxRetries == 0:
		return DefaultMaxRetries
	}
	return c.MaxRetries
}

func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout.D()
}

func (c Config) keyEnv(def string) string {
	if c.APIKeyEnv != "" {
		return c.APIKeyEnv
	}
	return def
}

// maxTokens is the request's cap, else the configured one, else def.
func (c Config) maxTokens(req *Request, def int) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	if c.MaxTokens > 0 {
		return c.MaxTokens
	}
	return def
}

func (c Config) temperature(req *Request) *float64 {
	if req.Temperature != nil {
		return req.Temperature
	}
	return c.Temperature
}

// credentials checks that cfg names a model and finds its API key in the
// environment variable the configuration names (or defaultEnv). A missing
// key is an error unless cfg.BaseURL is set. It also returns the HTTP client
// to use.
func (cfg Config) credentials(provider, defaultEnv string, opts Options, modelExample, keyHint string) (env, key string, hc *http.Client, err error) {
	if cfg.Model == "" {
		return "", "", nil, &Error{Provider: provider, Op: "configuring", Kind: ErrBadRequest,
			Err: fmt.Errorf("no model: set planner.model (for example %s)", modelExample)}
	}
	env = cfg.keyEnv(defaultEnv)
	key = opts.getenv(env)
	if key == "" && cfg.BaseURL == "" {
		return "", "", nil, &Error{Provider: provider, Op: "configuring", Kind: ErrAuth,
			Err: fmt.Errorf("no API key: set the environment variable %s (or name another one in planner.api_key_env)%s", env, keyHint)}
	}
	hc = opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return env, key, limitedClient(hc, cfg.maxResponseBytes()), nil
}

// Duration is a duration written as "30s" or as a number of milliseconds.
type Duration = duration.Duration

// builtWithout is the error of a provider left out of this binary by a
// build tag.
func builtWithout(provider, tag string) error {
	return &Error{Provider: provider, Op: "configuring", Kind: ErrBadRequest,
		Err: fmt.Errorf("this orchestra was built without the %s provider (build tag %s): use a release binary, or build without -tags %s", provider, tag, tag)}
}
