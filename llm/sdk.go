package llm

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// sdkModel is what the models served through a provider's official SDK
// (OpenAI's, Anthropic's) share: their configuration, where their key
// came from, their logger, and the frame of every call they make.
type sdkModel struct {
	provider string // ProviderOpenAI, ProviderAnthropic
	call     string // what a call is, for errors: "chat completion", "message"
	cfg      Config
	keyEnv   string // the variable the key is read from
	hasKey   bool
	log      *slog.Logger
}

// sdkOptions are the constructors of a provider SDK's request options O;
// C is the SDK's HTTP client interface, which *http.Client implements.
type sdkOptions[O, C any] struct {
	httpClient func(C) O
	maxRetries func(int) O
	baseURL    func(string) O
	production func() O
	apiKey     func(string) O
	header     func(key, value string) O
}

// newSDKModel checks cfg and finds its key (see Config.credentials), and
// returns the model that build makes of the shared part and the SDK's
// request options.
func newSDKModel[O, C any](provider, call, defaultEnv string, cfg Config, opts Options, modelExample, keyHint string, so sdkOptions[O, C], build func(sdkModel, []O) Model) (Model, error) {
	env, key, hc, err := cfg.credentials(provider, defaultEnv, opts, modelExample, keyHint)
	if err != nil {
		return nil, err
	}
	ro := []O{so.httpClient(any(hc).(C)), so.maxRetries(cfg.maxRetries())}
	if cfg.BaseURL != "" {
		ro = append(ro, so.baseURL(cfg.BaseURL))
	} else {
		ro = append(ro, so.production())
	}
	if key != "" {
		ro = append(ro, so.apiKey(key))
	}
	for k, v := range cfg.Headers {
		ro = append(ro, so.header(k, v))
	}
	return build(sdkModel{provider: provider, call: call, cfg: cfg, keyEnv: env, hasKey: key != "", log: opts.logger()}, ro), nil
}

// Name implements [Model].
func (m *sdkModel) Name() string { return m.provider + ":" + m.cfg.Model }

// whole returns the call of a model that answers whole: newCall makes it,
// read reads the answer (an answer it cannot read is a bad response).
func whole[P, O, A any](m *sdkModel, newCall func(context.Context, P, ...O) (A, error), read func(A) (*Response, error)) func(ctx context.Context, op string, p P) (*Response, error) {
	return func(ctx context.Context, op string, p P) (*Response, error) {
		a, err := newCall(ctx, p)
		if err != nil {
			return nil, err
		}
		resp, err := read(a)
		if err != nil {
			return nil, &Error{Provider: m.provider, Op: op, Kind: ErrBadResponse, Err: err}
		}
		return resp, nil
	}
}

// sdkError is what a provider's SDK error says.
type sdkError struct {
	status   int
	message  string         // the provider's own words, from the body
	response *http.Response // nil when there was none
	err      error          // shown in place of the SDK's error; nil keeps it
}

// wrap classifies err, an error of a call op: by what the SDK's error says
// (read by sdkErr), else by the transport's failure.
func (m *sdkModel) wrap(parent context.Context, op string, err error, sdkErr func(*Error) (sdkError, bool)) *Error {
	e := &Error{Provider: m.provider, Op: op, Err: err}
	if se, ok := sdkErr(e); ok {
		e.StatusCode = se.status
		e.Kind = kindForStatus(se.status)
		e.Message = se.message
		if se.err != nil {
			e.Err = se.err
		}
		if se.response != nil {
			e.RetryAfter = retryAfter(se.response.Header)
		}
	}
	classifyTransport(e, parent)
	if e.Kind == ErrAuth {
		e.Hint = authHint(m.keyEnv, m.hasKey)
	}
	return e
}

// generate is the frame of one model call of req, whole or streamed: it
// checks req and builds the SDK's parameters with params, then calls do
// within the configured timeout. An error of the call itself is
// classified (wrap, reading the SDK's errors with sdkErr) and logged at
// debug; do returns an *Error for an answer it could
// not read, which goes back as it is; an answer is logged at debug with
// what it used.
func generate[P any](ctx context.Context, m *sdkModel, req *Request, streamed bool,
	params func(*Request) (P, error),
	sdkErr func(*Error) (sdkError, bool),
	do func(ctx context.Context, op string, p P) (*Response, error),
) (*Response, error) {
	op := m.call + " with " + m.cfg.Model
	if err := req.validate(); err != nil {
		return nil, withOp(err, m.provider, op)
	}
	p, err := params(req)
	if err != nil {
		return nil, &Error{Provider: m.provider, Op: op, Kind: ErrBadRequest, Err: err}
	}
	tctx, cancel := context.WithTimeout(ctx, m.cfg.timeout())
	defer cancel()
	start := time.Now()
	resp, err := do(tctx, op, p)
	if e, ok := err.(*Error); ok {
		return nil, e
	}
	if err != nil {
		e := m.wrap(ctx, op, err, sdkErr)
		m.log.DebugContext(ctx, "model call failed", "model", m.Name(), "duration", time.Since(start), "error", e)
		return nil, e
	}
	at := []any{"model", m.Name(), "duration", time.Since(start)}
	if streamed {
		at = append(at, "streamed", true)
	}
	m.log.DebugContext(ctx, "model call", append(at,
		"input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"tool_calls", len(resp.ToolCalls), "stop_reason", resp.StopReason)...)
	return resp, nil
}
