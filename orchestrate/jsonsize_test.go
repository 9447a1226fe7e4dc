package orchestrate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// jsonSize must agree with json.Marshal byte for byte: capOutputs decides
// what to truncate from it.
func TestJSONSize(t *testing.T) {
	values := []any{
		nil, true, false, "", "plain", "quote\" back\\ tab\t nl\n cr\r bs\b ff\f nul\x00 \x1f",
		"<a href='x'>&amp;</a>", "del\x7f", "héllo wörld ✓ 𝄞", "bad \xff utf8 \xc3", "line\u2028sep\u2029",
		0.0, -0.0, 1.0, -1.5, 1e20, 1e21, 1e-6, 1e-7, 123456789.123, 5e-324, math.MaxFloat64, 0.1, 1.0 / 3,
		map[string]any{}, map[string]any(nil), []any{}, []any(nil),
		map[string]any{"a": 1.0, "<b>": []any{"x", nil, true, map[string]any{"c": "d"}}, "é": 2.5},
		[]any{1.0, "two", []any{3.0}, map[string]any{"four": 4.0}},
		3, int64(-7), json.Number("12.5"), struct {
			A string `json:"a"`
			B []int  `json:"b,omitempty"`
		}{A: "x<"},
		map[string]any{"n": 42, "s": []string{"a", "b"}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		values = append(values, string(b), rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)))
	}
	for _, v := range values {
		data, err := json.Marshal(v)
		n, ok := jsonSize(v)
		if ok != (err == nil) || ok && n != len(data) {
			t.Errorf("jsonSize(%#v) = %d, %v; json.Marshal gives %d bytes, err %v", v, n, ok, len(data), err)
		}
	}
	for _, v := range []any{math.Inf(1), math.NaN(), map[string]any{"x": math.NaN()}, []any{func() {}}} {
		if _, ok := jsonSize(v); ok {
			t.Errorf("jsonSize(%v) is ok; json.Marshal fails", v)
		}
	}
}
