package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// progressGrace is how long progress reports of a call are still relayed
// after the call returned.
const progressGrace = time.Second

// caller returns the Call of the catalog tool name, which is the tool
// called tool on the server. out, when not nil, is the resolved output
// schema that structured results must match.
func (s *server) caller(name, tool string, out *jsonschema.Schema) registry.CallFunc {
	call := s.call(name, tool, out)
	return func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
		res, err := call(ctx, req)
		return res, s.secrets.Error(err) // the URL's credentials may be in a transport error
	}
}

func (s *server) call(name, tool string, out *jsonschema.Schema) registry.CallFunc {
	return func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
		c, why := s.current()
		if c == nil {
			return nil, registry.Transient(fmt.Errorf("calling %s: %w: %v", name, registry.ErrServerUnavailable, why))
		}
		if _, ok := ctx.Deadline(); !ok && s.cfg.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout.D())
			defer cancel()
		}

		meta := mcp.Meta{toolcontext.MetaDepth: toolcontext.Depth(ctx)}
		if tp, ok := toolcontext.TraceparentFrom(ctx); ok {
			meta[toolcontext.MetaTraceparent] = tp
		}
		if s.cfg.ForwardsIDs() {
			toolcontext.MetaIDs(ctx, meta)
		}
		args := req.Arguments
		if args == nil {
			args = map[string]any{} // a nil map would be sent as null
		}
		params := &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: args}
		if req.Progress != nil {
			tok := s.m.newProgressToken()
			s.m.progress.Store(tok, req.Progress)
			// Notifications are handled in order but apart from responses,
			// so reports sent just before the result may be handled just
			// after it: keep routing them for a moment.
			defer func() {
				time.AfterFunc(progressGrace, func() { s.m.progress.Delete(tok) })
			}()
			params.SetProgressToken(tok)
		}

		res, err := c.session.CallTool(ctx, params)
		if err != nil {
			return nil, s.callError(ctx, c, name, err)
		}
		if limit := s.m.opts.MaxResponseBytes; limit > 0 && !withinBound(res, limit) {
			if n := jsonSize(res); n > limit {
				return nil, fmt.Errorf("calling %s: the result is %d bytes as JSON, more than the limit of %d bytes", name, n, limit)
			}
		}
		if out != nil && !res.IsError && res.StructuredContent != nil {
			if err := schemas.ValidateValue(out, res.StructuredContent); err != nil {
				return nil, fmt.Errorf("calling %s: the server returned structuredContent that does not match the tool's outputSchema: %w", name, err)
			}
		}
		return &registry.Result{Structured: res.StructuredContent, Content: res.Content, IsError: res.IsError}, nil
	}
}

// callError classifies a failed call: the caller's cancellation or
// deadline; a lost server (the connection is marked lost, so the server is
// restarted, and the error wraps ErrServerUnavailable and is transient); or
// any other failure of a live server (a JSON-RPC error, a result that does
// not decode), which is returned as it is.
func (s *server) callError(ctx context.Context, c *connection, name string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("calling %s: %w", name, ctxErr)
	}
	// Checked first: the HTTP transport wraps network failures in a
	// JSON-RPC "rejected by transport" error.
	if connectionLost(err) {
		c.markLost(fmt.Errorf("call of %s failed: %w", name, err))
		return registry.Transient(fmt.Errorf("calling %s: %w: %w", name, registry.ErrServerUnavailable, err))
	}
	return fmt.Errorf("calling %s: %w", name, err)
}

// connectionLost reports whether err means the server cannot be reached.
func connectionLost(err error) bool {
	var (
		urlErr *url.Error
		netErr *net.OpError
	)
	return errors.Is(err, mcp.ErrConnectionClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, os.ErrClosed) ||
		errors.As(err, &urlErr) || errors.As(err, &netErr)
}

// jsonSize is the length of v encoded as JSON, counted without holding
// the encoding in memory.
func jsonSize(v any) int64 {
	var n countWriter
	if err := json.NewEncoder(&n).Encode(v); err != nil {
		return 0
	}
	return int64(n) - 1 // the encoder's newline
}

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}

// withinBound reports whether res is surely within limit bytes as JSON
// without encoding it (counting encodes the whole result again, a cost the
// common small result is spared).
func withinBound(res *mcp.CallToolResult, limit int64) bool {
	bound, ok := sizeBound(res)
	return ok && bound <= limit
}

// sizeBound returns a bound that res's JSON encoding never exceeds,
// computed without encoding it: every string byte counted as the six of
// its longest escape, every number as the longest a float64 encodes to.
// ok is false for a result it cannot bound (a content block other than
// plain text, input requests); the caller then counts.
func sizeBound(res *mcp.CallToolResult) (n int64, ok bool) {
	if res.InputRequests != nil || res.RequestState != "" {
		return 0, false
	}
	// {"_meta":,"content":[],"structuredContent":,"isError":true,"resultType":"..."}
	n = 128
	if res.Meta != nil {
		m, ok := valueBound(map[string]any(res.Meta))
		if !ok {
			return 0, false
		}
		n += m
	}
	for _, c := range res.Content {
		t, isText := c.(*mcp.TextContent)
		if !isText || t.Meta != nil || t.Annotations != nil {
			return 0, false
		}
		n += 32 + 6*int64(len(t.Text)) // {"type":"text","text":""},
	}
	m, ok := valueBound(res.StructuredContent)
	return n + m, ok
}

// valueBound bounds the JSON encoding of a value decoded from JSON.
func valueBound(v any) (int64, bool) {
	switch v := v.(type) {
	case nil, bool:
		return 5, true
	case float64:
		return 32, true
	case json.Number:
		return int64(len(v)), true
	case string:
		return 2 + 6*int64(len(v)), true
	case []any:
		n := int64(2)
		for _, e := range v {
			m, ok := valueBound(e)
			if !ok {
				return 0, false
			}
			n += m + 1
		}
		return n, true
	case map[string]any:
		n := int64(2)
		for k, e := range v {
			m, ok := valueBound(e)
			if !ok {
				return 0, false
			}
			n += 2 + 6*int64(len(k)) + 1 + m + 1
		}
		return n, true
	default:
		return 0, false
	}
}
