package httpedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/internal/jsonrpcerr"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// ModernProtocol reports whether r speaks protocol 2026-07-28 or later,
// which carries its version in a header on every request.
func ModernProtocol(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
}

// Intake is what the HTTP edge does with a request before the SDK sees
// it: it reads a POST's body within server.body_timeout and
// server.max_request_bytes, refuses an initialize beyond
// server.max_sessions, and ties each tools/call to its connection
// (Calls).
type Intake struct {
	// Server is the server block of the configuration.
	Server config.Server
	// Stateless is set when HTTP is served without sessions.
	Stateless bool
	// Sessions counts the server's open HTTP sessions.
	Sessions func() int
	// Calls keeps the tools/call requests in flight.
	Calls *Calls
	// Tokens authenticate callers; nil without authentication.
	Tokens *Tokens
}

// Handler returns h behind the intake.
func (in *Intake) Handler(h http.Handler) http.Handler {
	cfg := in.Server
	limit := cfg.MaxRequestBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(callHeader)
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		data, ok := readBody(w, r, limit, cfg.BodyTimeout)
		if !ok {
			return
		}
		if err := cfg.RequestGate().Check(data); err != nil {
			// A JSON-RPC error for the request's id fails only that
			// request: clients keep their session.
			id, _ := jsonrpcerr.RequestID(data)
			writeError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest, jsongate.Describe("the message", err, orchestrate.RequestGateKeys()))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		m, ok := peek(data)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		switch {
		case m.Method == "initialize" && !in.Stateless && !ModernProtocol(r) && session == "":
			if n := in.Sessions(); cfg.MaxSessions > 0 && n >= cfg.MaxSessions {
				msg := fmt.Sprintf("the server holds %d sessions, its limit (server.max_sessions): close sessions you no longer use (DELETE /mcp with the Mcp-Session-Id header), wait for idle ones to expire (server.session_timeout), or raise server.max_sessions in the configuration file", n)
				writeError(w, http.StatusServiceUnavailable, m.ID, codeServerBusy, msg)
				return
			}
		case m.Method == "tools/call":
			if id, ok := canonicalID(m.ID); ok {
				call, tok := in.Calls.start(r, callKey{session: session, caller: clientKey(r, in.Tokens), id: id})
				defer in.Calls.end(tok)
				r.Header.Set(callHeader, tok)
				w = &callWriter{ResponseWriter: w, call: call}
			}
		case m.Method == "notifications/cancelled":
			if id, ok := canonicalID(m.Params.RequestID); ok {
				in.Calls.cancelled(callKey{session: session, caller: clientKey(r, in.Tokens), id: id})
			}
		}
		h.ServeHTTP(w, r)
	})
}

// codeServerBusy is the JSON-RPC error code of a request refused because
// a server-wide limit is reached (an implementation-defined server error).
const codeServerBusy = -32000

// readBody reads r's body within timeout. A body larger than limit is
// answered with 413 and a JSON-RPC error, for the request's id, that says
// how to fix it: the SDK's own limit answers with plain text, which makes
// its client drop the whole session, where an error for the request fails
// only that request. A body that does not arrive in time is answered with
// 408 and the connection closed.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, bool) {
	if timeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	if limit <= 0 {
		limit = math.MaxInt64 - 1
	}
	size := r.ContentLength
	var data []byte
	if size <= limit {
		// Unknown or small enough: read at most limit+1 bytes to be sure.
		var err error
		data, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			w.Header().Set("Connection", "close")
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				http.Error(w, fmt.Sprintf("the request body did not arrive within %s (server.body_timeout)", timeout), http.StatusRequestTimeout)
				return nil, false
			}
			http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusBadRequest)
			return nil, false
		}
		if int64(len(data)) <= limit {
			return data, true
		}
		size = -1
	} else {
		// Enough to find the request's id, which comes before its params.
		data, _ = io.ReadAll(io.LimitReader(r.Body, min(limit, 64<<10)))
	}
	what := "the request body"
	if size > 0 {
		what = fmt.Sprintf("the request body of %d bytes", size)
	}
	msg := fmt.Sprintf("%s is larger than the limit of %d bytes (server.max_request_bytes): send a smaller plan, pass large data by reference (a URL or a step that fetches it), or raise server.max_request_bytes in the configuration file", what, limit)
	w.Header().Set("Connection", "close") // the rest of the body is not read
	id, ok := jsonrpcerr.RequestID(data)
	if !ok {
		http.Error(w, msg, http.StatusRequestEntityTooLarge)
		return nil, false
	}
	writeError(w, http.StatusRequestEntityTooLarge, id, jsonrpc.CodeInvalidRequest, msg)
	return nil, false
}

// writeError answers with status and a JSON-RPC error for the request id
// (a jsonrpc.ID, or the id as raw JSON).
func writeError(w http.ResponseWriter, status int, id any, code int64, msg string) {
	var rid jsonrpc.ID
	switch id := id.(type) {
	case jsonrpc.ID:
		rid = id
	case json.RawMessage:
		rid, _ = jsonrpcerr.RawID(id)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(jsonrpcerr.Encode(rid, code, msg))
}
