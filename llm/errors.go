package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors classifying a failed call. Every error a [Model] returns is
// an [*Error] whose Kind is one of these (or nil when the failure fits none),
// so callers test them with [errors.Is].
var (
	// ErrRateLimited: the provider answered 429 (or reported overload) after
	// its retries; [Error.RetryAfter] says how long it asked to wait.
	ErrRateLimited = errors.New("rate limited")
	// ErrTimeout: the call did not finish within the configured Timeout or
	// the context's deadline.
	ErrTimeout = errors.New("timed out")
	// ErrAuth: the provider rejected the credentials (401 or 403), or none
	// were configured.
	ErrAuth = errors.New("authentication failed")
	// ErrBadRequest: the provider rejected the request itself (400, 404, 413,
	// 422): a wrong model name, a schema it does not accept, a prompt too long.
	ErrBadRequest = errors.New("bad request")
	// ErrUnavailable: the provider failed (5xx, connection refused) after its
	// retries, or the client offers no sampling.
	ErrUnavailable = errors.New("provider unavailable")
	// ErrBadResponse: the answer could not be understood (for example, no
	// choices, or tool arguments that are not JSON).
	ErrBadResponse = errors.New("bad response")
	// ErrScriptExhausted: a scripted model has no responses left.
	ErrScriptExhausted = errors.New("script exhausted")
	// ErrInputRequired: the call must be completed by the client in another
	// round trip; see [InputSampling].
	ErrInputRequired = errors.New("input required from the client")
)

// Error is the error every [Model] returns.
type Error struct {
	// Provider is "openai", "anthropic", "scripted" or "sampling".
	Provider string
	// Op says what was being done, e.g. "chat completion with gpt-4o-mini".
	Op string
	// Kind is one of the sentinel errors, or nil.
	Kind error
	// StatusCode is the HTTP status of the provider's answer, when there was one.
	StatusCode int
	// RetryAfter is how long the provider asked to wait before trying again,
	// when it said so.
	RetryAfter time.Duration
	// Hint tells a person how to fix the problem, e.g. which environment
	// variable holds the key.
	Hint string
	// Message is the provider's own explanation, when it gave one
	// (e.g. "The model 'x' does not exist").
	Message string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Provider != "" {
		b.WriteString(e.Provider)
		b.WriteString(": ")
	}
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
		if e.StatusCode != 0 {
			fmt.Fprintf(&b, " (HTTP %d)", e.StatusCode)
		}
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
		}
		if e.Hint != "" {
			b.WriteString(": ")
			b.WriteString(e.Hint)
		}
		if e.Err != nil || e.Message != "" {
			b.WriteString(": ")
		}
	}
	if e.Message != "" {
		b.WriteString(e.Message)
		if e.Err != nil {
			b.WriteString(": ")
		}
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and the underlying error, so that errors.Is matches both.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

var errNilRequest = errors.New("nil request")

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// kindForStatus classifies an HTTP status code.
func kindForStatus(code int) error {
	switch {
	case code == http.StatusTooManyRequests || code == 529: // 529: Anthropic "overloaded"
		return ErrRateLimited
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return ErrAuth
	case code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout:
		return ErrTimeout
	case code >= 500:
		return ErrUnavailable
	case code >= 400:
		return ErrBadRequest
	}
	return nil
}

// retryAfter parses the Retry-After-Ms and Retry-After headers of h.
func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := time.Until(t); d > 0 {
				return d
			}
		}
	}
	return 0
}

// classifyTransport fills in e.Kind for errors that carry no HTTP status:
// context errors and network failures. parent is the caller's context, to
// tell the caller's cancellation from the provider's timeout.
func classifyTransport(e *Error, parent context.Context) {
	if e.Kind != nil {
		return
	}
	err := e.Err
	switch {
	case errors.Is(err, ErrTooLarge):
		e.Kind = ErrBadResponse
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind = ErrTimeout
	case errors.Is(err, context.Canceled):
		// A cancellation by the caller stays context.Canceled (through Err);
		// one caused by the provider timeout is a timeout.
		if parent.Err() == nil {
			e.Kind = ErrTimeout
		}
	default:
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			e.Kind = ErrTimeout
		} else if errors.As(err, &nerr) || isConnRefused(err) {
			e.Kind = ErrUnavailable
		}
	}
}

func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// authHint says what to check when a provider refused the key.
func authHint(env string, hasKey bool) string {
	if hasKey {
		return fmt.Sprintf("check the API key in the environment variable %s", env)
	}
	return fmt.Sprintf("the environment variable %s holds no API key", env)
}

// withOp fills in the provider and operation of an *Error made before them.
func withOp(err error, provider, op string) error {
	var e *Error
	if errors.As(err, &e) {
		if e.Provider == "" {
			e.Provider = provider
		}
		if e.Op == "" {
			e.Op = op
		}
	}
	return err
}
