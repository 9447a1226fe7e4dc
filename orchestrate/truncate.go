package orchestrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// truncationMarker replaces v, size bytes as JSON, when it is too large
// for the response. Only the preview is encoded.
func truncationMarker(v any, size, limit int) map[string]any {
	preview := previewJSON(v, min(limit/2, 1024))
	return map[string]any{
		"_truncated": true,
		"bytes":      size,
		"preview":    strings.ToValidUTF8(string(preview), "") + "…",
		"message":    fmt.Sprintf("a value of %d bytes was truncated to fit the response; read the full record or narrow the output with json_query", size),
	}
}

// capOutputs replaces outputs larger than the per-step limit with markers,
// then the largest ones until the response fits its limit. The resolved
// arguments of steps and the bindings (which repeat the outputs of steps
// with a result_key) count as outputs: each of them could carry a large
// value into the response.
func capOutputs(a *Artifact, perStep, total int) {
	var all []capSlot
	add := func(sl capSlot) {
		v := sl.get(a)
		if v == nil {
			return
		}
		size, ok := jsonSize(v)
		if !ok {
			return // json.Marshal fails on it
		}
		if size > perStep {
			sl.set(a, truncationMarker(v, size, perStep))
			a.Truncated = true
			size, _ = jsonSize(sl.get(a))
		}
		sl.size = size
		all = append(all, sl)
	}
	var walk func([]*StepRecord)
	walk = func(rs []*StepRecord) {
		for _, r := range rs {
			add(capSlot{rec: r, kind: capOutput})
			if r.Arguments != nil {
				add(capSlot{rec: r, kind: capArguments})
			}
			walk(r.Children)
		}
	}
	walk(a.Steps)
	for _, k := range slices.Sorted(maps.Keys(a.Bindings)) {
		add(capSlot{kind: capBinding, key: k})
	}
	size := 0
	for _, s := range all {
		size += s.size
	}
	if size <= total {
		return
	}
	slices.SortStableFunc(all, func(x, y capSlot) int { return y.size - x.size })
	for _, s := range all {
		if size <= total {
			break
		}
		marker := truncationMarker(s.get(a), s.size, 256)
		small, _ := json.Marshal(marker)
		if len(small) >= s.size {
			continue // a marker would not make the response smaller
		}
		s.set(a, marker)
		size -= s.size - len(small)
		a.Truncated = true
	}
}

// capSlot is one value of the envelope that capOutputs may replace: a
// step's output or arguments, or a binding.
type capSlot struct {
	rec  *StepRecord
	kind int
	key  string
	size int
}

const (
	capOutput = iota
	capArguments
	capBinding
)

func (s capSlot) get(a *Artifact) any {
	switch s.kind {
	case capOutput:
		return s.rec.Output
	case capArguments:
		if s.rec.Arguments == nil {
			return nil
		}
		return s.rec.Arguments
	}
	return a.Bindings[s.key]
}

func (s capSlot) set(a *Artifact, m map[string]any) {
	switch s.kind {
	case capOutput:
		s.rec.Output = m
	case capArguments:
		s.rec.Arguments = m
	default:
		a.Bindings[s.key] = m
	}
}

// jsonSize returns len(json.Marshal(v)) without building the encoding for
// the types decoded JSON is made of, and ok=false where json.Marshal fails.
func jsonSize(v any) (n int, ok bool) {
	switch v := v.(type) {
	case nil:
		return 4, true
	case bool:
		if v {
			return 4, true
		}
		return 5, true
	case string:
		return jsonStringSize(v), true
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return 0, false
		}
		var buf [32]byte
		return len(appendJSONFloat(buf[:0], v)), true
	case map[string]any, []any:
		return jsonSizeWithin(v, math.MaxInt)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return 0, false
	}
	return len(data), true
}

// appendJSONFloat formats f the way encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// jsonStringSize is the length of s encoded by encoding/json, which escapes
// HTML characters and replaces invalid UTF-8.
func jsonStringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
