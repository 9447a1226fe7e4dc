package orchestrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/bytesize"
)

// Memory is the byte budget that the runs of engines sharing it hold
// together: every step's output and resolved arguments are charged to it
// while their run lives, and new runs are refused (busy) when it is nearly
// spent or the heap is over it. An Engine makes one from
// Limits.MaxMemoryBytes; engines made with With share their parent's.
type Memory struct {
	limit int64
	used  atomic.Int64

	lastGC atomic.Int64 // Unix nanoseconds of the last collection admit forced
}

// NewMemory returns a budget of limit bytes; 0 or less means no limit.
func NewMemory(limit int64) *Memory { return &Memory{limit: limit} }

// Used returns the bytes charged by running runs.
func (m *Memory) Used() int64 { return m.used.Load() }

// charge adds n bytes unless that passes the limit.
func (m *Memory) charge(n int64) bool {
	if m.limit <= 0 {
		m.used.Add(n)
		return true
	}
	for {
		used := m.used.Load()
		if used+n > m.limit {
			return false
		}
		if m.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (m *Memory) release(n int64) { m.used.Add(-n) }

// admit says why a new run that may hold up to reserve bytes cannot start
// now, or "" when it can: the runs already running hold too much, or the
// live heap is over the limit.
func (m *Memory) admit(reserve int64) string {
	if m.limit <= 0 {
		return ""
	}
	if used := m.used.Load(); used+reserve > m.limit {
		return fmt.Sprintf("the plans running hold %s of outputs and arguments, and one more may hold %s: that would pass the server's limit of %s (limits.max_memory_bytes)",
			formatBytes(used), formatBytes(reserve), formatBytes(m.limit))
	}
	// The heap's objects, garbage included, are read at once; only when
	// they are over the limit does a collection (at most once a second)
	// tell what is live.
	if heap := readHeap(heapObjects); heap <= uint64(m.limit) {
		return ""
	}
	now := time.Now().UnixNano()
	if last := m.lastGC.Load(); now-last > int64(time.Second) && m.lastGC.CompareAndSwap(last, now) {
		runtime.GC()
	}
	if live := readHeap(heapLive); live > uint64(m.limit) {
		return fmt.Sprintf("the server's heap holds %s, over its limit of %s (limits.max_memory_bytes)", formatBytes(int64(live)), formatBytes(m.limit))
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
	if why := e.mem.admit(int64(e.lim.MaxRunBytes)); why != "" {
		return &Issue{Code: CodeBusy, Message: why + ": retry in a moment, or raise limits.max_memory_bytes in the configuration file"}
	}
	return nil
}

// runBytes is what one run holds: its steps' outputs and resolved
// arguments, charged to the run's own limit (limits.max_run_bytes) and
// to the engine's Memory until the run ends.
type runBytes struct {
	mem   *Memory
	limit int64

	mu    sync.Mutex
	used  int64
	ended bool // released: later charges are not counted
}

// charge adds n bytes for what step holds, or returns the step's error:
// too_large past the run's limit, busy past the server's.
func (b *runBytes) charge(step string, n int64) *Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return nil
	}
	if b.limit > 0 && b.used+n > b.limit {
		return &Error{StepID: step, Code: CodeTooLarge, Message: fmt.Sprintf(
			"the run's steps would hold more than %s of outputs and arguments (limits.max_run_bytes); pass less data between steps: select the fields you need with json_query, or split the plan",
			formatBytes(b.limit))}
	}
	if b.mem != nil && !b.mem.charge(n) {
		return &Error{StepID: step, Code: CodeBusy, Message: fmt.Sprintf(
			"the plans running on the server hold %s of outputs and arguments, its limit (limits.max_memory_bytes): retry in a moment",
			formatBytes(b.mem.limit))}
	}
	b.used += n
	return nil
}

// releaseAll gives the run's bytes back to the server's budget, once the
// run has ended.
func (b *runBytes) releaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem != nil {
		b.mem.release(b.used)
	}
	b.used, b.ended = 0, true
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
