package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/internal/bytesize"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// The budget tree (package budget): an engine's server node holds the
// bytes of every run of the engines sharing it (limits.max_memory_bytes);
// a request's root, made by [Engine.Budgeted], sits under it with the
// request's caps; each run is a node under the budget its context
// carries (the request's, an agent's, the run whose step started it), or
// under the server's node when it carries none. Every node's spending
// counts against every node above it.

// serverMemory is the server's node: what the runs of engines sharing it
// hold together.
type serverMemory struct {
	node   *budget.Budget
	lastGC atomic.Int64 // Unix nanoseconds of the last collection admit forced
}

// newServerMemory returns the server's node, of limit bytes (0 or less:
// no limit).
func newServerMemory(limit int64) *serverMemory {
	return &serverMemory{node: budget.New("the server", budget.Grant{Bytes: budget.Cap{Max: limit, Key: "limits.max_memory_bytes"}})}
}

// grant returns the caps of a request or a run under lim, its deadline
// (from start) and the tools the engine allows.
func (e *Engine) grant(lim Limits, start time.Time) budget.Grant {
	return budget.Grant{
		ToolCalls:  budget.Cap{Max: int64(lim.MaxToolCalls), Key: "limits.max_tool_calls"},
		ModelCalls: budget.Cap{Max: int64(lim.MaxModelCalls), Key: "limits.max_model_calls"},
		AgentRuns:  budget.Cap{Max: int64(lim.MaxAgentRuns), Key: "limits.max_agent_runs"},
		Bytes:      budget.Cap{Max: int64(lim.MaxRunBytes), Key: "limits.max_run_bytes"},
		Deadline:   start.Add(lim.PlanTimeout),
		Tools:      e.allow,
	}
}

// Budgeted returns ctx carrying the budget that the work of req draws
// from: the one ctx carries already (the request is nested in another's
// work: an agent's, a plan's), or else a new root for the request under
// the engine's limits as req lowers them (req may be nil). The root's
// deadline is the plan timeout from now: planning, the run and the
// reactive fallback share it.
func (e *Engine) Budgeted(ctx context.Context, req *Request) context.Context {
	if _, ok := toolcontext.BudgetFrom(ctx); ok {
		return ctx
	}
	lim := e.lim
	if req != nil {
		lim = lim.forRequest(req)
	}
	g := e.grant(lim, time.Now())
	g.Root = true
	return toolcontext.WithBudget(ctx, e.mem.node.Child("the request", g))
}

// admit says why a new run that may hold up to reserve bytes cannot start
// now, or "" when it can: the runs already running hold too much of the
// server's node, or the live heap is over its limit.
func (e *Engine) admit(reserve int64) string {
	c, ok := e.mem.node.Limit(budget.Bytes)
	if !ok {
		return ""
	}
	limit := c.Max
	if used := e.mem.node.Used(budget.Bytes); used+reserve > limit {
		return fmt.Sprintf("the plans running hold %s of outputs, arguments, records and responses, and one more may hold %s: that would pass the server's limit of %s (limits.max_memory_bytes)",
			formatBytes(used), formatBytes(reserve), formatBytes(limit))
	}
	// The heap's objects, garbage included, are read at once; only when
	// they are over the limit does a collection (at most once a second)
	// tell what is live.
	if heap := readHeap(heapObjects); heap <= uint64(limit) {
		return ""
	}
	now := time.Now().UnixNano()
	if last := e.mem.lastGC.Load(); now-last > int64(time.Second) && e.mem.lastGC.CompareAndSwap(last, now) {
		runtime.GC()
	}
	if live := readHeap(heapLive); live > uint64(limit) {
		return fmt.Sprintf("the server's heap holds %s, over its limit of %s (limits.max_memory_bytes)", formatBytes(int64(live)), formatBytes(limit))
	}
	return ""
}

// The runtime/metrics the admission reads: the heap's objects now,
// garbage included, and what the last collection found live.
const (
	heapObjects = "/memory/classes/heap/objects:bytes"
	heapLive    = "/gc/heap/live:bytes"
)

func readHeap(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// Admit returns a busy issue when the engine's memory budget cannot take
// one more run, nil when it can. Servers call it before they start a run.
func (e *Engine) Admit() *Issue {
	if why := e.admit(int64(e.lim.MaxRunBytes)); why != "" {
		return &Issue{Code: CodeBusy, Message: why + ": retry in a moment, or raise limits.max_memory_bytes in the configuration file"}
	}
	return nil
}

// MemoryHeld returns the bytes the runs of engines sharing e's server
// node hold now.
func (e *Engine) MemoryHeld() int64 { return e.mem.node.Used(budget.Bytes) }

// runBytes is what one run holds: its steps' outputs and resolved
// arguments and the records of its loops' iterations, charged to the
// run's node of the budget tree (and so to the request's and the
// server's) until the run ends.
type runBytes struct {
	node *budget.Budget
	mem  *budget.Budget // the server's node: past its cap is busy, not too_large

	mu    sync.Mutex
	used  int64
	ended bool // released: later charges are not counted
}

// charge adds n bytes for what step holds, or returns the step's error:
// too_large past the run's or the request's limit, busy past the
// server's.
func (b *runBytes) charge(step string, n int64) *Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return nil
	}
	if err := b.node.Spend(budget.Bytes, n); err != nil {
		return bytesError(step, err, b.mem)
	}
	b.used += n
	return nil
}

// bytesError is the step error of a byte charge that a node refused.
func bytesError(step string, err error, mem *budget.Budget) *Error {
	var ex *budget.Exceeded
	if !errors.As(err, &ex) {
		return &Error{StepID: step, Code: CodeTooLarge, Message: err.Error()}
	}
	if ex.Node == mem {
		return &Error{StepID: step, Code: CodeBusy, Message: fmt.Sprintf(
			"the plans running on the server hold %s of outputs, arguments, records and responses, its limit (limits.max_memory_bytes): retry in a moment",
			formatBytes(ex.Cap.Max))}
	}
	return &Error{StepID: step, Code: CodeTooLarge, Message: fmt.Sprintf(
		"%s would hold more than %s of step outputs, arguments and records (%s); pass less data between steps: select the fields you need with json_query, loop over fewer elements, or split the plan",
		ex.Name, formatBytes(ex.Cap.Max), ex.Cap.Key)}
}

// releaseAll gives the run's bytes back to the tree, once the run has
// ended; when a handler answers with the run's envelope (answer), they
// stay counted until the handler has encoded its response.
func (b *runBytes) releaseAll(a *answer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a != nil {
		a.keep(b.node, b.used)
	} else {
		b.node.Release(budget.Bytes, b.used)
	}
	b.used, b.ended = 0, true
}

// answer keeps the bytes of the run a handler answers with counted until
// its response is encoded: the envelope is made of them, and the response
// is the envelope once or twice more. The first run started under it
// (the request's own) hands its bytes over as it ends; runs nested in it
// release theirs as usual.
type answer struct {
	claimed atomic.Bool
	mu      sync.Mutex
	node    *budget.Budget
	bytes   int64
}

type answerKey struct{}

// withAnswer returns ctx whose first run keeps its bytes for a, and a.
func withAnswer(ctx context.Context) (context.Context, *answer) {
	a := &answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

// claimAnswer returns the answer of ctx if no run has claimed it yet.
func claimAnswer(ctx context.Context) *answer {
	if a, ok := ctx.Value(answerKey{}).(*answer); ok && a.claimed.CompareAndSwap(false, true) {
		return a
	}
	return nil
}

func (a *answer) keep(node *budget.Budget, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node, a.bytes = node, a.bytes+n
}

// release gives back what a kept.
func (a *answer) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node.Release(budget.Bytes, a.bytes)
	a.bytes = 0
}

// errTooLarge is a value that passed the room it had.
type errTooLarge struct{ limit int }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("more than %s", formatBytes(int64(e.limit)))
}

// jsonSizeWithin returns the length of v encoded as JSON, like jsonSize,
// but stops walking once it passes room: then it returns a number above
// room. ok is false where json.Marshal fails.
func jsonSizeWithin(v any, room int) (n int, ok bool) {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return 4, true
		}
		n = 2 + max(len(v)-1, 0) // braces and commas
		for k, e := range v {
			m, ok := jsonSizeWithin(e, room-n)
			if !ok {
				return 0, false
			}
			n += jsonStringSize(k) + 1 + m
			if n > room {
				return n, true
			}
		}
		return n, true
	case []any:
		if v == nil {
			return 4, true
		}
		n = 2 + max(len(v)-1, 0)
		for _, e := range v {
			m, ok := jsonSizeWithin(e, room-n)
			if !ok {
				return 0, false
			}
			n += m
			if n > room {
				return n, true
			}
		}
		return n, true
	}
	return jsonSize(v)
}

// formatBytes renders a byte count for messages.
func formatBytes(n int64) string { return bytesize.Format(n) }

// previewJSON returns the first n bytes (or a few more) of v encoded as
// JSON, encoding no more of v than that: a preview of a large value costs
// what the preview does.
func previewJSON(v any, n int) []byte {
	var b []byte
	var add func(v any) bool // reports whether there is room left
	add = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if v == nil {
				b = append(b, "null"...)
				break
			}
			b = append(b, '{')
			keys := slices.Sorted(maps.Keys(v))
			for i, k := range keys {
				if i > 0 {
					b = append(b, ',')
				}
				b, _ = appendJSONValue(b, k, n-len(b))
				b = append(b, ':')
				if len(b) >= n || !add(v[k]) {
					return false
				}
			}
			b = append(b, '}')
		case []any:
			if v == nil {
				b = append(b, "null"...)
				break
			}
			b = append(b, '[')
			for i, e := range v {
				if i > 0 {
					b = append(b, ',')
				}
				if len(b) >= n || !add(e) {
					return false
				}
			}
			b = append(b, ']')
		default:
			b, _ = appendJSONValue(b, v, n-len(b))
		}
		return len(b) < n
	}
	add(v)
	if len(b) > n {
		b = b[:n]
	}
	return b
}

// appendJSONValue appends the JSON of a scalar; a string is cut to about
// room bytes first.
func appendJSONValue(b []byte, v any, room int) ([]byte, error) {
	if s, ok := v.(string); ok && len(s) > room+1 {
		v = s[:max(room+1, 0)]
	}
	data, err := json.Marshal(v)
	return append(b, data...), err
}
