package runlog

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Levels knows which sessions can receive logging notifications, so that
// the lines of a run are formatted only for a client that will get them.
//
// The SDK drops every notification of a session whose client never set a
// level, but its handler reports itself enabled all the same, after which
// each line is built, redacted and encoded for nothing. A client receives
// lines only when it asked for them: when it set a level on its session
// (logging/setLevel), or when its request carries one in _meta (protocol
// 2026-07-28). The throwaway session stateless HTTP makes for each request
// of an older protocol has the level info from the SDK, but its client
// asked for nothing (and some report unrequested notifications as errors),
// so it gets none.
type Levels struct {
	set sync.Map // weak.Pointer[mcp.ServerSession] -> struct{}
}

// mcpLevels are the levels of the MCP specification, most verbose first.
var mcpLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// Middleware refuses a logging/setLevel whose level the specification
// does not define, and notes the sessions whose client set a level.
func (l *Levels) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "logging/setLevel" {
			if r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && r.Params != nil && !slices.Contains(mcpLevels, r.Params.Level) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown logging level %q: use one of %s", r.Params.Level, joinLevels())}
			}
		}
		res, err := next(ctx, method, req)
		if method == "logging/setLevel" && err == nil && req.GetSession() != nil {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				key := weak.Make(ss)
				if _, loaded := l.set.LoadOrStore(key, struct{}{}); !loaded {
					// The entry goes when the session does.
					runtime.AddCleanup(ss, func(k weak.Pointer[mcp.ServerSession]) { l.set.Delete(k) }, key)
				}
			}
		}
		return res, err
	}
}

// wanted reports whether the client of req may receive logging
// notifications.
func (l *Levels) wanted(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	if req.Params != nil {
		if _, ok := req.Params.GetMeta()[mcp.MetaKeyLogLevel]; ok {
			return true
		}
	}
	_, ok := l.set.Load(weak.Make(req.Session))
	return ok
}

func joinLevels() string {
	names := make([]string, len(mcpLevels))
	for i, l := range mcpLevels {
		names[i] = string(l)
	}
	return strings.Join(names, ", ")
}
