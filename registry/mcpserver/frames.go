package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/jsongate"
)

// What a downstream server sends is read through a filter before the MCP
// SDK decodes it, so that no message costs more than the limit and no
// stray output costs a session:
//
//   - a message larger than the limit is not held: its id is picked out
//     as it streams by, and the call gets a JSON-RPC error naming the
//     limit in its place (the session goes on);
//   - a line that is not a JSON-RPC message (a stray print to stdout) is
//     dropped and logged, where the SDK would end the session on it;
//   - log notifications, which orchestra does not relay, are dropped
//     before they are decoded, and other notifications beyond a rate are
//     dropped too: a flood costs a scan of its bytes, not a decode each.

// oversizeCode is the JSON-RPC error code of a response replaced because
// it was over the limit (the JSON-RPC "server error" range).
const oversizeCode = -32001

// oversizeError is the JSON-RPC error response that stands for an
// oversized response with the given id.
func oversizeError(id []byte, limit int64) []byte {
	msg, _ := json.Marshal(fmt.Sprintf("the server's response is larger than %d bytes, the limit (limits.max_downstream_response_bytes in the configuration file); ask the tool for less", limit))
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, oversizeCode, msg)
}

// downstreamGate bounds the nesting and the values of one message from a
// downstream server with the decoding gate, before the SDK decodes it: a
// response within the byte limit may still nest past what clients parse,
// or hold millions of values that decode to far more memory than its
// bytes. The element bound grows with the byte limit (one value per 8
// bytes), never below the gate's default.
func downstreamGate(limit int64) jsongate.Limits {
	return jsongate.Limits{Depth: jsongate.DefaultDepth, Elements: int(max(jsongate.DefaultElements, limit/8))}
}

// gateError is the JSON-RPC error response that stands for a response
// with the given id that the decoding gate refused.
func gateError(id []byte, err error) []byte {
	msg, _ := json.Marshal(fmt.Sprintf("the server's response %v, past what orchestra decodes from a downstream server (the element limit is one value per 8 bytes of limits.max_downstream_response_bytes); ask the tool for less", err))
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, oversizeCode, msg)
}

// topScanner reads a JSON object a byte at a time, keeping only its
// top-level "id" and "method" values (up to maxTopValue bytes each), so
// that a message of any size can be classified in constant memory.
type topScanner struct {
	depth     int
	inString  bool
	escaped   bool
	keyPos    bool   // the next string at depth 1 is a key
	key       []byte // the key being read (first bytes only)
	lastKey   string
	capturing string // "id" or "method" while their value streams by
	value     []byte
	id        []byte
	method    []byte
	started   bool
}

const maxTopValue = 256

func (s *topScanner) write(p []byte) {
	for _, c := range p {
		s.byte(c)
	}
}

func (s *topScanner) byte(c byte) {
	if s.capturing != "" && s.depth == 1 && !s.inString && (c == ',' || c == '}') {
		v := bytes.TrimSpace(s.value)
		if s.capturing == "id" {
			s.id = v
		} else {
			s.method = v
		}
		s.capturing, s.value = "", nil
	}
	if s.capturing != "" && len(s.value) < maxTopValue {
		s.value = append(s.value, c)
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.depth == 1 && s.keyPos {
				s.lastKey, s.keyPos = string(s.key), false
			}
		default:
			if s.depth == 1 && s.keyPos && len(s.key) < 16 {
				s.key = append(s.key, c)
			}
		}
		return
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && s.keyPos {
			s.key = s.key[:0]
		}
	case '{', '[':
		if !s.started && c == '{' {
			s.started = true
		}
		s.depth++
		if s.depth == 1 {
			s.keyPos = true
		}
	case '}', ']':
		s.depth--
	case ',':
		if s.depth == 1 {
			s.keyPos = true
		}
	case ':':
		if s.depth == 1 && (s.lastKey == "id" || s.lastKey == "method") {
			s.capturing, s.value = s.lastKey, s.value[:0]
		}
	}
}

// notificationLimiter drops log notifications and thins the others to a
// rate: a token bucket of burst notifications refilled at perSecond.
type notificationLimiter struct {
	perSecond, burst float64
	onDrop           func(method string, n int) // reports drops, at most once a second

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped map[string]int
	told    time.Time
}

func newNotificationLimiter(onDrop func(string, int)) *notificationLimiter {
	return &notificationLimiter{perSecond: 200, burst: 400, tokens: 400, onDrop: onDrop}
}

// allow reports whether a notification of method (its JSON string, as it
// appears in the message) passes.
func (l *notificationLimiter) allow(method []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	pass := false
	if string(method) != `"notifications/message"` {
		if !l.last.IsZero() {
			l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.perSecond)
		}
		l.last = now
		if l.tokens >= 1 {
			l.tokens--
			pass = true
		}
	}
	if !pass {
		if l.dropped == nil {
			l.dropped = map[string]int{}
		}
		l.dropped[string(method)]++
		if now.Sub(l.told) >= time.Second && l.onDrop != nil {
			for m, n := range l.dropped {
				l.onDrop(m, n)
			}
			clear(l.dropped)
			l.told = now
		}
	}
	return pass
}

// frameSlack is room for a JSON-RPC message's own fields around a result
// of the largest size allowed.
const frameSlack = 64 << 10

// lineFilter reads a stdio server's stdout, one newline-delimited
// message at a time, and passes on what the SDK should decode.
type lineFilter struct {
	r      *bufio.Reader
	limit  int64 // the configured limit; a message may be frameSlack larger
	notes  *notificationLimiter
	onDrop func(reason string, sample []byte)

	line []byte
	out  []byte // what Read returns next
}

func newLineFilter(r io.Reader, limit int64, notes *notificationLimiter, onDrop func(string, []byte)) *lineFilter {
	return &lineFilter{r: bufio.NewReaderSize(r, 64<<10), limit: limit, notes: notes, onDrop: onDrop}
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// Close does nothing: the connection is closed by closing the server's
// stdin (see procWriter).
func (f *lineFilter) Close() error { return nil }

// next reads one line and sets out to what passes of it.
func (f *lineFilter) next() error {
	f.line = f.line[:0]
	var scan topScanner
	oversize := false
	for {
		chunk, err := f.r.ReadSlice('\n')
		switch {
		case oversize:
			// Only the id is wanted of an oversized message: once it
			// has streamed by, the rest is skipped, not scanned.
			if len(scan.id) == 0 {
				scan.write(chunk)
			}
		case int64(len(f.line)+len(chunk)) > f.limit+frameSlack:
			oversize = true
			scan.write(f.line)
			scan.write(chunk)
			f.line = f.line[:0]
		default:
			f.line = append(f.line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (oversize || len(bytes.TrimSpace(f.line)) == 0) {
			return err
		}
		break
	}
	if oversize {
		if len(scan.id) == 0 {
			f.drop("a message larger than the limit, without an id", nil)
			return nil
		}
		f.out = append(oversizeError(scan.id, f.limit), '\n')
		return nil
	}
	line := bytes.TrimSpace(f.line)
	if len(line) == 0 {
		return nil
	}
	if line[0] != '{' && line[0] != '[' || !json.Valid(line) {
		f.drop("a line that is not a JSON-RPC message", line)
		return nil
	}
	if line[0] == '{' {
		scan.write(line)
		if len(scan.id) == 0 && len(scan.method) > 0 && !f.notes.allow(scan.method) {
			return nil
		}
	}
	if err := downstreamGate(f.limit).Check(line); err != nil {
		if len(scan.id) == 0 {
			f.drop("a message past the decoding gate's limits, without an id", nil)
			return nil
		}
		f.out = append(gateError(scan.id, err), '\n')
		return nil
	}
	f.out = append(f.line[:0:0], f.line...)
	if f.out[len(f.out)-1] != '\n' {
		f.out = append(f.out, '\n')
	}
	return nil
}

func (f *lineFilter) drop(reason string, sample []byte) {
	if f.onDrop != nil {
		if len(sample) > 200 {
			sample = sample[:200]
		}
		f.onDrop(reason, sample)
	}
}

// dropReporter calls report for the first drops of each second and counts
// the rest into the next report, so that a flood of stray output costs a
// few log lines.
type dropReporter struct {
	report func(reason string, sample []byte, more int)

	mu     sync.Mutex
	second time.Time
	told   int
	more   int
}

const dropReportsPerSecond = 5

func (d *dropReporter) drop(reason string, sample []byte) {
	d.mu.Lock()
	now := time.Now().Truncate(time.Second)
	if !now.Equal(d.second) {
		d.second, d.told = now, 0
	}
	if d.told >= dropReportsPerSecond {
		d.more++
		d.mu.Unlock()
		return
	}
	d.told++
	more := d.more
	d.more = 0
	d.mu.Unlock()
	d.report(reason, sample, more)
}

// limitTransport reads the bodies of a Streamable HTTP server's responses
// through the same rules: a JSON response over the limit is replaced by a
// JSON-RPC error for the request's id, and an event stream is filtered
// event by event.
type limitTransport struct {
	base   http.RoundTripper
	limit  int64
	notes  *notificationLimiter
	onDrop func(reason string, sample []byte)
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id := requestID(req)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	max := t.limit + frameSlack
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		resp.Body = &sseFilter{r: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body, limit: t.limit, callID: id, notes: t.notes, onDrop: t.onDrop}
	case mt == "application/json" && resp.StatusCode == http.StatusOK:
		data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		if int64(len(data)) > max {
			if len(id) == 0 {
				return nil, fmt.Errorf("the server's response is larger than %d bytes, the limit (limits.max_downstream_response_bytes)", t.limit)
			}
			data = oversizeError(id, t.limit)
		} else if err := downstreamGate(t.limit).Check(data); err != nil {
			if len(id) == 0 {
				return nil, fmt.Errorf("the server's response %w; ask the tool for less", err)
			}
			data = gateError(id, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(data))
		resp.ContentLength = int64(len(data))
		resp.Header.Del("Content-Length")
	default:
		// Error pages and the like: nothing is decoded from them but a
		// message, and no more than the limit is read.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, max), resp.Body}
	}
	return resp, nil
}

// requestID returns the JSON-RPC id of the request req posts, if any.
func requestID(req *http.Request) []byte {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var scan topScanner
	buf := make([]byte, 4096)
	for {
		n, err := body.Read(buf)
		scan.write(buf[:n])
		if err != nil || len(scan.id) > 0 {
			break
		}
	}
	return scan.id
}

// sseFilter reads a text/event-stream body event by event, applying the
// rules to each event's data.
type sseFilter struct {
	r      *bufio.Reader
	body   io.Closer
	limit  int64
	callID []byte // the id of the request whose response this stream is
	notes  *notificationLimiter
	onDrop func(reason string, sample []byte)

	event []byte // the event's lines so far
	out   []byte
	err   error
}

func (f *sseFilter) Close() error { return f.body.Close() }

func (f *sseFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.err = f.next()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// next reads one event and sets out to what passes of it.
func (f *sseFilter) next() error {
	f.event = f.event[:0]
	var scan topScanner
	var size int64
	oversize, atLineStart, inData := false, true, false
	for {
		chunk, err := f.r.ReadSlice('\n')
		if atLineStart {
			line := bytes.TrimRight(chunk, "\r\n")
			if len(line) == 0 && len(chunk) > 0 {
				break // the blank line that ends an event
			}
			inData = bytes.HasPrefix(line, []byte("data:"))
			if inData {
				d := chunk[len("data:"):]
				scan.write(bytes.TrimPrefix(d, []byte(" ")))
			}
		} else if inData {
			scan.write(chunk)
		}
		atLineStart = len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		size += int64(len(chunk))
		if size > f.limit+frameSlack {
			oversize = true
		}
		if !oversize {
			f.event = append(f.event, chunk...)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if len(f.event) > 0 && !oversize {
				f.out = append(f.out, f.event...)
			}
			return err
		}
	}
	if oversize {
		id := scan.id
		if len(id) == 0 {
			id = f.callID
		}
		if len(id) == 0 {
			if f.onDrop != nil {
				f.onDrop("an event larger than the limit, without an id", nil)
			}
			return nil
		}
		f.out = fmt.Appendf(f.out, "event: message\ndata: %s\n\n", oversizeError(id, f.limit))
		return nil
	}
	if len(scan.id) == 0 && len(scan.method) > 0 && !f.notes.allow(scan.method) {
		return nil
	}
	if err := downstreamGate(f.limit).Check(f.event); err != nil {
		id := scan.id
		if len(id) == 0 {
			id = f.callID
		}
		if len(id) == 0 {
			if f.onDrop != nil {
				f.onDrop("an event past the decoding gate's limits, without an id", nil)
			}
			return nil
		}
		f.out = fmt.Appendf(f.out, "event: message\ndata: %s\n\n", gateError(id, err))
		return nil
	}
	f.out = append(append(f.out, f.event...), '\n')
	return nil
}
