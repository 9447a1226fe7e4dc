package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{
		in:       t.in,
		out:      t.out,
		maxLine:  t.maxLine,
		incoming: make(chan jsonrpc.Message),
		closed:   make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

type lineConn struct {
	in      io.Reader
	out     io.Writer
	maxLine int

	wmu      sync.Mutex
	incoming chan jsonrpc.Message // closed when reading ends
	readErr  error                // why reading ended; set before incoming is closed
	closed   chan struct{}
	once     sync.Once
}

// idPrefix is how much of an oversized line is kept to find its id.
const idPrefix = 64 << 10

func (c *lineConn) readLoop() {
	defer close(c.incoming)
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
// the first idPrefix bytes, discards the rest, and reports tooLong.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(chunk) > limit+2: // +2 for "\r\n"
			tooLong = true
			keep := min(len(chunk), max(0, idPrefix-len(line)))
			line = append(line, chunk[:keep]...)
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// parse decodes one line. A line that is not a message is answered with a
// JSON-RPC error and yields nil.
func (c *lineConn) parse(line []byte, tooLong bool) jsonrpc.Message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if tooLong {
		c.reject(line, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the message is larger than the limit of %d bytes (server.max_request_bytes): send a smaller plan, pass large data by reference (a URL or a step that fetches it), or raise server.max_request_bytes in the configuration file", c.maxLine))
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
	var data []byte
	if id, ok := requestID(line); ok {
		data, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
	} else {
		data, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	}
	_ = c.writeLine(data)
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case msg, ok := <-c.incoming:
		if !ok {
			if c.readErr == nil || errors.Is(c.readErr, io.EOF) {
				return nil, io.EOF
			}
			return nil, c.readErr
		}
		return msg, nil
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
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

func (c *lineConn) Close() error {
	c.once.Do(func() {
		c.wmu.Lock()
		close(c.closed)
		c.wmu.Unlock()
		if cl, ok := c.in.(io.Closer); ok {
			cl.Close()
		}
	})
	return nil
}

func (c *lineConn) SessionID() string { return "" }
