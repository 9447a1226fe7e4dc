package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/orchestra-mcp/orchestra/internal/jsongate"
)

// DefaultMaxResponseBytes caps what is read of one answer of an SDK
// provider when Config.MaxResponseBytes is not set.
const DefaultMaxResponseBytes = 8 << 20

// streamOverhead is how much larger than its answer an event stream may
// be: each piece of the answer, a few characters, comes in an event of
// its own with a few hundred bytes of JSON around it.
const streamOverhead = 16

// ErrTooLarge reports an answer larger than Config.MaxResponseBytes.
var ErrTooLarge = errors.New("the model's answer is larger than the limit")

// tooLarge is the error of an answer past its limit; it is ErrTooLarge and
// ErrBadResponse.
type tooLarge struct {
	what  string // "answer", "event stream"
	limit int64
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("the model's %s is larger than the limit of %d bytes (max_response_bytes in the model's configuration): lower max_tokens, or raise max_response_bytes", e.what, e.limit)
}

func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge || target == ErrBadResponse }

// maxResponseBytes is the configured cap of an answer, or the default.
func (c Config) maxResponseBytes() int64 {
	if c.MaxResponseBytes > 0 {
		return c.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

// limitedClient returns a copy of hc whose response bodies are read
// through the decoding gate: a JSON body of at most limit bytes (and the
// gate's nesting and value limits), an event stream of at most
// streamOverhead times limit. Reading past a limit fails with an error
// that is ErrTooLarge; nothing more is read, and the request is not
// retried.
func limitedClient(hc *http.Client, limit int64) *http.Client {
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &answerLimit{base: base, limit: limit}
	return &c
}

// answerLimit is the transport of limitedClient.
type answerLimit struct {
	base  http.RoundTripper
	limit int64
}

func (t *answerLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	gate := jsongate.Default(t.limit)
	what := "answer"
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		gate, what = jsongate.Limits{Bytes: t.limit * streamOverhead}, "event stream"
	}
	resp.Body = &limitedBody{r: gate.Reader(resp.Body), c: resp.Body, what: what, header: resp.Header}
	return resp, nil
}

// limitedBody reads a response body through the gate.
type limitedBody struct {
	r      io.Reader
	c      io.Closer
	what   string
	header http.Header
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if e, ok := jsongate.AsError(err); ok {
		// The Anthropic SDK reads a body within its retries and asks
		// again when reading fails, unless the response says not to: an
		// answer too large would be too large again.
		b.header.Set("X-Should-Retry", "false")
		if e.Kind == jsongate.KindBytes {
			return n, &tooLarge{what: b.what, limit: e.Max}
		}
		return n, fmt.Errorf("the model's %s %w: %w", b.what, e, ErrBadResponse)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.c.Close() }

// DecodeArguments decodes a tool call's arguments, or other JSON a model
// wrote, into v, once they have passed the decoding gate's default
// nesting and value limits (their bytes are bounded by the answer's).
func DecodeArguments(raw []byte, v any) error {
	if err := jsongate.Default(0).Check(raw); err != nil {
		return fmt.Errorf("the model's JSON %w", err)
	}
	return json.Unmarshal(raw, v)
}

// answerCounter counts the text and argument bytes of a streamed answer.
type answerCounter struct {
	n, limit int64
}

// add counts d and reports an error once the answer passes the limit.
func (c *answerCounter) add(d Delta) error {
	c.n += int64(len(d.Text) + len(d.Arguments) + len(d.Name))
	if c.n > c.limit {
		return &tooLarge{what: "answer", limit: c.limit}
	}
	return nil
}
