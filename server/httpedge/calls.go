package httpedge

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callHeader carries the key of a tools/call request's HTTP call from the
// HTTP layer to the tool handler, which reads it from the request's
// RequestExtra. A value a client sends under this name is removed first.
const callHeader = "X-Orchestra-Call"

// Calls tie each tools/call request that arrives over HTTP to the
// connection that carries it, on every protocol version and with or
// without sessions:
//
//   - a client that drops the connection cannot get the answer, so the
//     call's context ends and the plan is cancelled;
//   - a notifications/cancelled for the call cancels it too, even where the
//     SDK cannot route it (stateless HTTP serves each POST in a session of
//     its own), and nothing more is written for it: the specification says
//     the receiver of a cancelled request does not answer it.
//
// A cancellation names a request by its JSON-RPC id, which is unique only
// within the client's session. Without sessions, the call is found by the
// id, the caller's credential and its address; when that still matches more
// than one call in flight, none is cancelled rather than someone else's.
type Calls struct {
	mu    sync.Mutex
	seq   uint64
	byTok map[string]*httpCall
	byKey map[callKey][]*httpCall
}

// callKey is what a cancellation can name a call by.
type callKey struct {
	session string // Mcp-Session-Id; empty without sessions
	caller  string // the caller's credential or address (clientKey)
	id      string // the JSON-RPC id, as JSON
}

type httpCall struct {
	key       callKey
	ctx       context.Context
	cancel    context.CancelFunc
	cancelled atomic.Bool // by the client: nothing more is written
}

// start registers a call carried by r and returns it with the token that
// names it in callHeader.
func (c *Calls) start(r *http.Request, key callKey) (*httpCall, string) {
	ctx, cancel := context.WithCancel(r.Context())
	call := &httpCall{key: key, ctx: ctx, cancel: cancel}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTok == nil {
		c.byTok = map[string]*httpCall{}
		c.byKey = map[callKey][]*httpCall{}
	}
	c.seq++
	tok := strconv.FormatUint(c.seq, 36)
	c.byTok[tok] = call
	c.byKey[key] = append(c.byKey[key], call)
	return call, tok
}

// end forgets the call tok names, once its request is answered.
func (c *Calls) end(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call, ok := c.byTok[tok]
	if !ok {
		return
	}
	call.cancel()
	delete(c.byTok, tok)
	calls := c.byKey[call.key]
	for i, other := range calls {
		if other == call {
			calls = append(calls[:i], calls[i+1:]...)
			break
		}
	}
	if len(calls) == 0 {
		delete(c.byKey, call.key)
	} else {
		c.byKey[call.key] = calls
	}
}

// cancelled cancels the call key names, when exactly one does, and
// reports whether it did.
func (c *Calls) cancelled(key callKey) bool {
	c.mu.Lock()
	calls := c.byKey[key]
	var call *httpCall
	if len(calls) == 1 {
		call = calls[0]
	}
	c.mu.Unlock()
	if call == nil {
		return false
	}
	call.cancelled.Store(true)
	call.cancel()
	return true
}

// Context returns the context of the call that req arrived in, if it
// arrived over HTTP.
func (c *Calls) Context(req *mcp.CallToolRequest) (context.Context, bool) {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return nil, false
	}
	tok := req.Extra.Header.Get(callHeader)
	if tok == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	call, ok := c.byTok[tok]
	if !ok {
		return nil, false
	}
	return call.ctx, true
}

// callWriter writes a call's response until the client cancels the call.
type callWriter struct {
	http.ResponseWriter
	call *httpCall
}

func (w *callWriter) WriteHeader(code int) {
	if !w.call.cancelled.Load() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *callWriter) Write(p []byte) (int, error) {
	if w.call.cancelled.Load() {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *callWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.call.cancelled.Load() {
		f.Flush()
	}
}

func (w *callWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// message is the part of a JSON-RPC message the HTTP layer reads.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// peek reads the message a request body holds; ok is false for a batch or
// anything that is not one JSON-RPC message.
func peek(body []byte) (m message, ok bool) {
	if err := json.Unmarshal(body, &m); err != nil {
		return message{}, false
	}
	return m, true
}

// canonicalID returns a JSON-RPC id as the JSON the SDK would write, so
// that 1 and 1.0 name the same call.
func canonicalID(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return "", false
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return "", false
	}
	data, err := json.Marshal(id.Raw())
	return string(data), err == nil
}
