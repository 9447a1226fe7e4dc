package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/internal/jsonrpcerr"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// lineTransport serves MCP over a newline-delimited stream, one JSON-RPC
// message per line, as the stdio transport specifies. Unlike the SDK's
// IOTransport, which decodes a stream of JSON values and gives up on the
// first malformed one, it answers a bad line with a JSON-RPC error and reads
// on: a broken or oversized message never ends the session.
type lineTransport struct {
	in      io.Reader
	out     io.Writer
	maxLine int
	gate    jsongate.Limits // each line's nesting and values

	conn *lineConn // set by Connect
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{
		in:        t.in,
		out:       t.out,
		maxLine:   t.maxLine,
		gate:      t.gate,
		incoming:  make(chan jsonrpc.Message),
		closed:    make(chan struct{}),
		stop:      make(chan struct{}),
		pending:   map[jsonrpc.ID]bool{},
		cancelled: map[jsonrpc.ID]bool{},
	}
	go c.readLoop()
	t.conn = c
	return c, nil
}

// lineConn is one stdio session. It keeps the ids of the requests it has
// read and not yet answered: a request the client cancelled
// (notifications/cancelled) gets no response, as the specification says,
// and when stdin ends the session ends only once every request read is
// answered, so a client that writes a request and closes stdin still gets
// its answer.
type lineConn struct {
	in      io.Reader
	out     io.Writer
	maxLine int
	gate    jsongate.Limits

	wmu      sync.Mutex
	incoming chan jsonrpc.Message // closed when reading ends
	readErr  error                // why reading ended; set before incoming is closed
	closed   chan struct{}
	once     sync.Once
	stop     chan struct{} // closed to stop taking requests
	stopOnce sync.Once

	inputEnded atomic.Bool // stdin reached its end

	mu        sync.Mutex
	pending   map[jsonrpc.ID]bool // requests read and not answered
	cancelled map[jsonrpc.ID]bool // pending requests the client cancelled
	answered  chan struct{}       // closed and replaced when pending empties
}

// stopReading stops taking requests: on shutdown, what was read is
// answered and nothing new starts.
func (c *lineConn) stopReading() {
	c.stopOnce.Do(func() { close(c.stop) })
}

// idPrefix is how much of an oversized line is kept to find its id.
const idPrefix = 64 << 10

func (c *lineConn) readLoop() {
	defer close(c.incoming)
	defer c.inputEnded.Store(true)
	r := bufio.NewReaderSize(c.in, 64<<10)
	for {
		line, tooLong, err := readLine(r, c.maxLine)
		if msg := c.parse(line, tooLong); msg != nil {
			select {
			case c.incoming <- msg:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			c.readErr = err
			return
		}
	}
}

// readLine reads one line of at most limit bytes. For a longer line it keeps
// the first idPrefix bytes and the last idPrefix bytes (where a client that
// writes "id" last puts it), discards the rest, and reports tooLong; the
// two pieces are joined by a newline, which no line holds otherwise.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	var tail []byte
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case tooLong:
			tail = appendTail(tail, chunk)
		case len(line)+len(chunk) > limit+2: // +2 for "\r\n"
			tooLong = true
			keep := min(len(chunk), max(0, idPrefix-len(line)))
			line = append(line, chunk[:keep]...)
			tail = appendTail(tail, chunk[keep:])
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			line = append(append(line, '\n'), tail...)
		}
		return line, tooLong, err
	}
}

// appendTail appends p to tail and keeps the last idPrefix bytes.
func appendTail(tail, p []byte) []byte {
	if len(p) >= idPrefix {
		return append(tail[:0], p[len(p)-idPrefix:]...)
	}
	if over := len(tail) + len(p) - idPrefix; over > 0 {
		tail = append(tail[:0], tail[over:]...)
	}
	return append(tail, p...)
}

// parse decodes one line. A line that is not a message is answered with a
// JSON-RPC error and yields nil.
func (c *lineConn) parse(line []byte, tooLong bool) jsonrpc.Message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if tooLong {
		head, tail, _ := bytes.Cut(line, []byte("\n"))
		if _, ok := jsonrpcerr.RequestID(head); !ok {
			if id, ok := trailingID(tail); ok {
				head = []byte(`{"id":` + id + `}`)
			}
		}
		c.reject(head, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the message is larger than the limit of %d bytes (server.max_request_bytes): send a smaller plan, pass large data by reference (a URL or a step that fetches it), or raise server.max_request_bytes in the configuration file", c.maxLine))
		return nil
	}
	if err := c.gate.Check(line); err != nil {
		c.reject(line, jsonrpc.CodeInvalidRequest, gateMessage(err))
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err == nil {
		return msg
	}
	switch {
	case !json.Valid(line):
		c.reject(line, jsonrpc.CodeParseError, fmt.Sprintf("parse error: the line is not valid JSON (%v); send each JSON-RPC message as one JSON object on one line", jsonError(line)))
	case line[0] == '[':
		c.reject(line, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message per line")
	default:
		c.reject(line, jsonrpc.CodeInvalidRequest, fmt.Sprintf("not a JSON-RPC 2.0 message (%v): send {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"...\", \"params\": {...}}", err))
	}
	return nil
}

func jsonError(line []byte) error {
	var v any
	err := json.Unmarshal(line, &v)
	if err == nil {
		err = errors.New("invalid JSON")
	}
	return err
}

// reject answers the request that line holds, if its id can be read, or
// with a null id, with a JSON-RPC error.
func (c *lineConn) reject(line []byte, code int64, msg string) {
	id, _ := jsonrpcerr.RequestID(line)
	_ = c.writeLine(jsonrpcerr.Encode(id, code, msg))
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case <-c.stop:
		// Shutting down: block, so that nothing new starts, until closed.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		}
	case msg, ok := <-c.incoming:
		if !ok {
			// stdin ended: answer what was read, then end.
			select {
			case <-c.idle():
			case <-c.closed:
			case <-ctx.Done():
			}
			if c.readErr == nil || errors.Is(c.readErr, io.EOF) {
				return nil, io.EOF
			}
			return nil, c.readErr
		}
		c.note(msg)
		return msg, nil
	}
}

// note records a request read, or the client's cancellation of one.
func (c *lineConn) note(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case req.IsCall():
		c.pending[req.ID] = true
	case req.Method == "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) != nil || p.RequestID == nil {
			return
		}
		if id, err := jsonrpc.MakeID(p.RequestID); err == nil && c.pending[id] {
			c.cancelled[id] = true
		}
	}
}

// answer records the response to id and reports whether it is to be
// written: not when the client cancelled the request.
func (c *lineConn) answer(id jsonrpc.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cancelled := c.cancelled[id]
	delete(c.pending, id)
	delete(c.cancelled, id)
	if len(c.pending) == 0 && c.answered != nil {
		close(c.answered)
		c.answered = nil
	}
	return !cancelled
}

// idle returns a channel that is closed once no request read is unanswered.
func (c *lineConn) idle() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if c.answered == nil {
		c.answered = make(chan struct{})
	}
	return c.answered
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && !c.answer(resp.ID) {
		return nil // cancelled by the client: no response
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	return c.writeLine(data)
}

func (c *lineConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	_, err := c.out.Write(append(data, '\n'))
	return err
}

// Close ends the session. It does not wait for a write in progress: a
// client that stopped reading stdout must not keep the process from
// shutting down.
func (c *lineConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		if cl, ok := c.in.(io.Closer); ok {
			cl.Close()
		}
		if cl, ok := c.out.(io.Closer); ok {
			cl.Close() // ends a write that waits for a reader, where it can
		}
	})
	return nil
}

func (c *lineConn) SessionID() string { return "" }

// trailingID finds the id of a JSON-RPC request from the end of its line,
// for a client that writes "id" as the last member: `..., "id": 7}`.
func trailingID(tail []byte) (string, bool) {
	m := trailingIDPattern.FindSubmatch(bytes.TrimSpace(tail))
	if m == nil {
		return "", false
	}
	return string(m[1]), json.Valid(m[1])
}

// trailingIDPattern matches an "id" member that closes the top-level
// object: a number or a string followed by the final "}".
var trailingIDPattern = regexp.MustCompile(`[,{]\s*"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*}$`)

// gateMessage says why the decoding gate refused a message, and which
// setting raises the limit.
func gateMessage(err error) string {
	return jsongate.Describe("the message", err, orchestrate.RequestGateKeys())
}
