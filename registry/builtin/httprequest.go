package builtin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// httpInput documents the arguments of http_request.
type httpInput struct {
	Method    string            `json:"method,omitempty" jsonschema:"The HTTP method. Default GET."`
	URL       string            `json:"url" jsonschema:"The absolute http or https URL. Its host must be in the allowed hosts."`
	Headers   map[string]string `json:"headers,omitempty" jsonschema:"Request headers, e.g. {\"Authorization\": \"Bearer ...\", \"Accept\": \"application/json\"}."`
	Query     map[string]any    `json:"query,omitempty" jsonschema:"Query parameters added to the URL: strings, numbers, booleans, or arrays of them for repeated keys."`
	Body      any               `json:"body,omitempty" jsonschema:"The request body: a string is sent as is; any other value is sent as JSON with Content-Type application/json unless headers set one."`
	TimeoutMS int               `json:"timeout_ms,omitempty" jsonschema:"Timeout for this request in milliseconds; it can lower the configured timeout, never raise it."`
}

// httpOutput documents the structured output of http_request.
type httpOutput struct {
	Status       int               `json:"status" jsonschema:"The HTTP status code. 4xx and 5xx are results, not failures: check it."`
	Headers      map[string]string `json:"headers" jsonschema:"Response headers with lower-case names (e.g. content-type); repeated headers are joined with \", \"."`
	Body         string            `json:"body" jsonschema:"The response body as text (base64 when body_encoding is base64)."`
	BodyEncoding string            `json:"body_encoding" jsonschema:"utf-8, or base64 when the body is not UTF-8 text or holds NUL bytes (binary data)."`
	JSON         any               `json:"json" jsonschema:"The body parsed as JSON when the response is JSON (content-type application/json or +json) and not truncated; otherwise null."`
	Truncated    bool              `json:"truncated" jsonschema:"True when the body was longer than the configured limit and was cut."`
	URL          string            `json:"url" jsonschema:"The final URL, after redirects."`
}

var httpMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}

// HTTPRequest returns the http_request tool, which makes an HTTP request to
// a host in cfg.AllowedHosts. Unless cfg.AllowPrivateNetworks is set it
// refuses to connect to non-public addresses, checked on the address
// actually dialed, and always to opts.Listeners.
func HTTPRequest(cfg HTTPConfig, opts Options) registry.Tool {
	return httpRequestTool(cfg, opts, nil)
}

// httpRequestTool builds http_request. exempt, when not nil, lets the dial
// guard pass the addresses it reports true for (tests use it to stand a
// loopback server in for a public one).
func httpRequestTool(cfg HTTPConfig, opts Options, exempt func(netip.AddrPort) bool) registry.Tool {
	cfg = cfg.withDefaults()
	h := newHTTPTool(cfg, opts, exempt)
	in := schemaFor[httpInput]()
	in.Properties["method"].Enum = []any{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	in.Properties["method"].Default = json.RawMessage(`"GET"`)
	in.Properties["url"].MinLength = new(1)
	in.Properties["timeout_ms"].Minimum = jsonschema.Ptr(1.0)
	out := schemaFor[httpOutput]()
	out.Properties["body_encoding"].Enum = []any{"utf-8", "base64"}
	return registry.Tool{
		Name:         "http_request",
		Title:        "HTTP request",
		Description:  h.description(),
		InputSchema:  in,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:           "HTTP request",
			ReadOnlyHint:    false,
			DestructiveHint: new(true),
			IdempotentHint:  false,
			OpenWorldHint:   new(true),
		},
		Source: Source,
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			res, err := h.call(ctx, req.Arguments)
			if r, ok := toolError(err); ok {
				return r, nil
			}
			return res, err
		},
	}
}

type httpTool struct {
	cfg     HTTPConfig
	hosts   *hostMatcher
	client  *http.Client
	timeout time.Duration
}

func newHTTPTool(cfg HTTPConfig, opts Options, exempt func(netip.AddrPort) bool) *httpTool {
	h := &httpTool{cfg: cfg, hosts: newHostMatcher(cfg.AllowedHosts), timeout: cfg.Timeout.D()}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Resolver: cfg.Resolver}
	if exempt == nil {
		exempt = cfg.AllowAddr
	}
	own := opts.hostAddrs
	if own == nil {
		own = (&hostAddrs{}).get
	}
	dialer.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &blockedAddrError{addr: address, reason: "unparsable address"}
		}
		if exempt != nil && exempt(ap) {
			return nil
		}
		if opts.Listeners.reaches(ap, own) {
			return &selfError{addr: ap.String()}
		}
		if cfg.AllowPrivateNetworks {
			return nil
		}
		return guardDial(address, own)
	}
	transport := &http.Transport{
		// No proxy: a proxy would be the address dialed, and the guard
		// would check it instead of the real destination.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	h.client = &http.Client{Transport: transport, CheckRedirect: h.checkRedirect}
	return h
}

// redirectLimitError is a request that redirected too often.
type redirectLimitError struct{ max int }

func (e *redirectLimitError) Error() string {
	return fmt.Sprintf("stopped after %d redirects (http_request.max_redirects in the config file); request the final URL directly", e.max)
}

// badRedirectError is a redirect to a URL the tool will not follow.
type badRedirectError struct{ url string }

func (e *badRedirectError) Error() string {
	return fmt.Sprintf("refusing to follow a redirect to %q: only http and https URLs are followed", e.url)
}

func (h *httpTool) checkRedirect(req *http.Request, via []*http.Request) error {
	if h.cfg.MaxRedirects < 0 {
		return http.ErrUseLastResponse
	}
	if len(via) > h.cfg.MaxRedirects {
		return &redirectLimitError{h.cfg.MaxRedirects}
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &badRedirectError{req.URL.String()}
	}
	if !h.hosts.allows(req.URL.Hostname()) {
		return &hostNotAllowedError{host: req.URL.Hostname(), allowed: h.hosts.patterns}
	}
	return nil
}

func (h *httpTool) description() string {
	var b strings.Builder
	b.WriteString(`Make an HTTP request (GET, POST, PUT, PATCH, DELETE, HEAD) and return the status, headers and body.

Use it to call web APIs and fetch pages from the allowed hosts. Send JSON by passing "body" as an object; pass query parameters in "query" rather than building the URL by hand.

HTTP error statuses (4xx, 5xx) are NOT tool failures: the call succeeds and "status" holds the code, so check "status" (and "body" for the server's message). Only transport failures (connection refused, DNS, TLS, timeout) fail the call, and those may be retried.

Output: {"status", "headers" (lower-case names), "body" (text, or base64 when body_encoding is base64), "json" (the parsed body when the response is JSON, else null), "truncated", "url"}. A later step reads a JSON API's data as "$<step>.output.json.<field>".

`)
	fmt.Fprintf(&b, "Allowed hosts: %s (\"*.example.com\" matches subdomains). Other hosts are refused.\n", strings.Join(h.hosts.patterns, ", "))
	if !h.cfg.AllowPrivateNetworks {
		b.WriteString("Loopback, private, link-local and other non-public addresses are refused, including host names that resolve to them and redirects to them.\n")
	}
	fmt.Fprintf(&b, "Limits: timeout %s, response body %s (longer bodies are cut and truncated is true), ", h.cfg.Timeout, formatBytes(h.cfg.MaxResponseBytes))
	if h.cfg.MaxRedirects < 0 {
		b.WriteString("redirects are not followed (the 3xx response is returned).")
	} else {
		fmt.Fprintf(&b, "at most %d redirects followed.", h.cfg.MaxRedirects)
	}
	return b.String()
}

func (h *httpTool) call(ctx context.Context, args map[string]any) (*registry.Result, error) {
	req, timeout, err := h.buildRequest(args)
	if err != nil {
		return nil, err
	}
	// The orchestration context goes along, whatever the plan's headers
	// say: an orchestra that receives the request counts from this depth.
	req.Header.Set(toolcontext.HeaderDepth, strconv.Itoa(toolcontext.Depth(ctx)))
	if tp, ok := toolcontext.TraceparentFrom(ctx); ok {
		req.Header.Set(toolcontext.HeaderTraceparent, tp)
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req = req.WithContext(reqCtx)

	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportError(ctx, req, timeout, err)
	}
	defer resp.Body.Close()

	var body []byte
	truncated := false
	if req.Method != http.MethodHead {
		body, err = io.ReadAll(io.LimitReader(resp.Body, h.cfg.MaxResponseBytes+1))
		if err != nil {
			return nil, h.transportError(ctx, req, timeout, fmt.Errorf("reading the response body: %w", err))
		}
		if int64(len(body)) > h.cfg.MaxResponseBytes {
			body, truncated = body[:h.cfg.MaxResponseBytes], true
		}
	}

	headers := make(map[string]any, len(resp.Header))
	for k, vs := range resp.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	out := map[string]any{
		"status":        resp.StatusCode,
		"headers":       headers,
		"body":          "",
		"body_encoding": "utf-8",
		"json":          nil,
		"truncated":     truncated,
		"url":           resp.Request.URL.String(),
	}
	if truncated {
		// Do not cut a UTF-8 sequence in half.
		for i := 0; i < utf8.UTFMax && len(body) > 0 && !utf8.Valid(body); i++ {
			body = body[:len(body)-1]
		}
	}
	// Text is sent as it is; bytes that are not UTF-8, or that hold NUL
	// (binary data, or a decompression bomb of zeros, which JSON would
	// escape to six times its size), as base64.
	if utf8.Valid(body) && bytes.IndexByte(body, 0) < 0 {
		out["body"] = string(body)
	} else {
		out["body"] = base64.StdEncoding.EncodeToString(body)
		out["body_encoding"] = "base64"
	}
	if !truncated && len(body) > 0 && isJSONContentType(resp.Header.Get("Content-Type")) {
		// Decoded only within the decoding gate's limits; the text is
		// there either way.
		var v any
		if err := decodeJSON(body, &v); err == nil {
			if v, err = normalizeJSON(v); err == nil {
				out["json"] = v
			}
		}
	}
	return jsonResult(out), nil
}

func isJSONContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// transportError sorts a failed request: refusals the model can act on are
// tool errors; the caller's cancellation is returned as it is; anything
// else may work on a retry.
func (h *httpTool) transportError(ctx context.Context, req *http.Request, timeout time.Duration, err error) error {
	var (
		self     *selfError
		blocked  *blockedAddrError
		host     *hostNotAllowedError
		limit    *redirectLimitError
		redirect *badRedirectError
	)
	switch {
	case errors.As(err, &self):
		return argErrorf("http_request: %s %s: %v", req.Method, req.URL.Redacted(), self)
	case errors.As(err, &blocked):
		return argErrorf("http_request: %s %s: %v", req.Method, req.URL.Redacted(), blocked)
	case errors.As(err, &host):
		return argErrorf("http_request: %s %s: redirected to a host that is not allowed: %v", req.Method, req.URL.Redacted(), host)
	case errors.As(err, &limit):
		return argErrorf("http_request: %s %s: %v", req.Method, req.URL.Redacted(), limit)
	case errors.As(err, &redirect):
		return argErrorf("http_request: %s %s: %v", req.Method, req.URL.Redacted(), redirect)
	case ctx.Err() != nil:
		return fmt.Errorf("http_request: %s %s: %w", req.Method, req.URL.Redacted(), ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return registry.Transient(fmt.Errorf("http_request: %s %s: no complete response within %s: %w", req.Method, req.URL.Redacted(), timeout, err))
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return registry.Transient(fmt.Errorf("http_request: %s %s: %w", req.Method, req.URL.Redacted(), err))
}

// buildRequest checks the arguments and turns them into a request and its
// timeout.
func (h *httpTool) buildRequest(args map[string]any) (*http.Request, time.Duration, error) {
	const tool = "http_request"
	if err := checkKeys(tool, args, "method", "url", "headers", "query", "body", "timeout_ms"); err != nil {
		return nil, 0, err
	}
	method, _, err := stringArg(tool, args, "method")
	if err != nil {
		return nil, 0, err
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if method == "" {
		method = http.MethodGet
	}
	if !slices.Contains(httpMethods, method) {
		return nil, 0, argErrorf("http_request: method %q is not supported: use one of %s", method, strings.Join(httpMethods, ", "))
	}

	raw, ok, err := stringArg(tool, args, "url")
	if err != nil {
		return nil, 0, err
	}
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, 0, argErrorf(`http_request: argument "url" is required: give an absolute URL such as "https://api.example.com/items"`)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, 0, argErrorf("http_request: the url %q does not parse: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, 0, argErrorf("http_request: the url %q must be absolute and start with http:// or https://", raw)
	}
	if u.Hostname() == "" {
		return nil, 0, argErrorf("http_request: the url %q has no host", raw)
	}
	if !h.hosts.allows(u.Hostname()) {
		return nil, 0, argErrorf("http_request: %v", &hostNotAllowedError{host: u.Hostname(), allowed: h.hosts.patterns})
	}

	query, err := objectArg(tool, args, "query")
	if err != nil {
		return nil, 0, err
	}
	if len(query) > 0 {
		q := u.Query()
		keys := make([]string, 0, len(query))
		for k := range query {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			vals, err := queryValues(k, query[k])
			if err != nil {
				return nil, 0, err
			}
			for _, v := range vals {
				q.Add(k, v)
			}
		}
		u.RawQuery = q.Encode()
	}

	headers, err := objectArg(tool, args, "headers")
	if err != nil {
		return nil, 0, err
	}
	hdr := http.Header{}
	for k, v := range headers {
		s, ok := v.(string)
		if !ok {
			return nil, 0, argErrorf("http_request: header %q must be a string, not %s", k, schemas.TypePhrase(v))
		}
		switch {
		case !validHeaderName(k):
			return nil, 0, argErrorf("http_request: %q is not a valid header name", k)
		case strings.ContainsAny(s, "\r\n\x00"):
			return nil, 0, argErrorf("http_request: header %q contains a line break or NUL", k)
		case strings.EqualFold(k, "Host"):
			return nil, 0, argErrorf("http_request: the Host header cannot be set: it comes from the url")
		}
		hdr.Set(k, s)
	}

	var body io.Reader
	if b, present := args["body"]; present && b != nil {
		if s, ok := b.(string); ok {
			body = strings.NewReader(s)
		} else {
			enc, err := json.Marshal(b)
			if err != nil {
				return nil, 0, argErrorf("http_request: the body cannot be encoded as JSON: %v", err)
			}
			body = bytes.NewReader(enc)
			if hdr.Get("Content-Type") == "" {
				hdr.Set("Content-Type", "application/json")
			}
		}
	}

	timeout := h.timeout
	if ms, ok, err := intArg(tool, args, "timeout_ms"); err != nil {
		return nil, 0, err
	} else if ok {
		if ms <= 0 {
			return nil, 0, argErrorf("http_request: timeout_ms must be a positive number of milliseconds, not %d", ms)
		}
		if ms < h.timeout.Milliseconds() {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}

	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		return nil, 0, argErrorf("http_request: %v", err)
	}
	req.Header = hdr
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "orchestra-http_request/1")
	}
	return req, timeout, nil
}

// queryValues renders one query argument as the values of its key.
func queryValues(key string, v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case bool:
		return []string{strconv.FormatBool(v)}, nil
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}, nil
	case json.Number:
		return []string{v.String()}, nil
	case int:
		return []string{strconv.Itoa(v)}, nil
	case int64:
		return []string{strconv.FormatInt(v, 10)}, nil
	case []any:
		var out []string
		for _, e := range v {
			if _, nested := e.([]any); nested {
				return nil, argErrorf("http_request: query parameter %q: arrays hold strings, numbers or booleans, not arrays", key)
			}
			s, err := queryValues(key, e)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	}
	return nil, argErrorf("http_request: query parameter %q must be a string, number, boolean or an array of them, not %s", key, schemas.TypePhrase(v))
}

// validHeaderName reports whether name is an HTTP token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
