package jsongate

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := strings.Repeat("[", 11) + strings.Repeat("]", 11)
	for _, tc := range []struct {
		name, doc string
		lim       Limits
		kind      string // "" for no error
	}{
		{"small", `{"a":[1,2,3]}`, Limits{Bytes: 100, Depth: 2, Elements: 4}, ""},
		{"bytes", `{"a":[1,2,3]}`, Limits{Bytes: 5}, KindBytes},
		{"depth", deep, Limits{Depth: 10}, KindDepth},
		{"depth exact", deep, Limits{Depth: 11}, ""},
		{"elements", `[1,2,3,4,5]`, Limits{Elements: 4}, KindElements},
		{"elements exact", `[1,2,3,4]`, Limits{Elements: 4}, ""},
		{"members", `{"a":1,"b":2,"c":3}`, Limits{Elements: 2}, KindElements},
		{"empty containers count", `[[],[],{}]`, Limits{Elements: 6}, ""},
		{"empty containers over", `[[],[],{}]`, Limits{Elements: 5}, KindElements},
		{"brackets in strings", `["[[[[[[", "{{{{,,,,"]`, Limits{Depth: 1, Elements: 2}, ""},
		{"escaped quotes", `["a\"[[[[", "\\", "[\\\"[["]`, Limits{Depth: 1, Elements: 3}, ""},
		{"escaped then bracket", `["\\"[[[]]]`, Limits{Depth: 3}, KindDepth},
		{"malformed passes", `[1,,2`, Limits{Depth: 5, Elements: 5}, ""},
		{"unbalanced closers", `]]]]{}`, Limits{Depth: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.lim.Check([]byte(tc.doc))
			if tc.kind == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			e, ok := AsError(err)
			if !ok || e.Kind != tc.kind {
				t.Fatalf("Check = %v, want a %s error", err, tc.kind)
			}
		})
	}
}

// depthOf measures how deeply valid JSON nests with encoding/json's
// tokenizer.
func depthOf(t *testing.T, doc []byte) int {
	dec := json.NewDecoder(bytes.NewReader(doc))
	d, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			d++
			deepest = max(deepest, d)
		case json.Delim(']'), json.Delim('}'):
			d--
		}
	}
}

// randomJSON builds a random valid document.
func randomJSON(r *rand.Rand, depth int) any {
	switch n := r.IntN(7); {
	case depth > 6 || n == 0:
		return r.Float64()
	case n == 1:
		return strings.Repeat(`a"\[{,`, r.IntN(3))
	case n < 4:
		arr := make([]any, r.IntN(5))
		for i := range arr {
			arr[i] = randomJSON(r, depth+1)
		}
		return arr
	default:
		m := map[string]any{}
		for i := range r.IntN(5) {
			m[strings.Repeat(`k"[`, i)] = randomJSON(r, depth+1)
		}
		return m
	}
}

// TestScannerAgreesWithDecoder checks the counts against encoding/json's
// on random documents written in random pieces.
func TestScannerAgreesWithDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		doc, _ := json.Marshal(randomJSON(r, 0))
		wantDepth := depthOf(t, doc)
		s := NewScanner(Limits{})
		for rest := doc; len(rest) > 0; {
			n := 1 + r.IntN(len(rest))
			if _, err := s.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if s.Depth() != 0 {
			t.Fatalf("%s: depth at the end %d", doc, s.Depth())
		}
		if err := (Limits{Depth: wantDepth}).Check(doc); err != nil {
			t.Fatalf("%s: at its own depth %d: %v", doc, wantDepth, err)
		}
		if wantDepth > 1 {
			if err := (Limits{Depth: wantDepth - 1}).Check(doc); err == nil {
				t.Fatalf("%s: passes depth %d, one less than its own", doc, wantDepth-1)
			}
		}
		elems := objectAware(t, doc)
		if s.Elements() != elems {
			t.Fatalf("%s: %d values, want %d", doc, s.Elements(), elems)
		}
	}
}

// objectAware counts values the way Limits.Elements defines them: every
// array element and object member, and one more for each empty container.
func objectAware(t *testing.T, doc []byte) int {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var count func(v any) int
	count = func(v any) int {
		switch v := v.(type) {
		case []any:
			n := max(len(v), 1)
			for _, e := range v {
				if isContainer(e) {
					n += count(e)
				}
			}
			return n
		case map[string]any:
			n := max(len(v), 1)
			for _, e := range v {
				if isContainer(e) {
					n += count(e)
				}
			}
			return n
		}
		return 0
	}
	return count(v)
}

func isContainer(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
		return true
	}
	return false
}

func TestReadAllStopsAtTheLimit(t *testing.T) {
	src := &countingReader{}
	_, err := Limits{Bytes: 1 << 20}.ReadAll(src)
	if e, ok := AsError(err); !ok || e.Kind != KindBytes {
		t.Fatalf("ReadAll of an endless source = %v, want a bytes error", err)
	}
	if src.n > 2<<20 {
		t.Fatalf("read %d bytes of an endless source under a 1 MiB limit", src.n)
	}
}

// countingReader is an endless source of zero bytes, like /dev/zero.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	clear(p)
	c.n += int64(len(p))
	return len(p), nil
}

func TestReader(t *testing.T) {
	doc := `{"a":[` + strings.Repeat("1,", 100) + `1]}`
	r := Limits{Elements: 50}.Reader(strings.NewReader(doc))
	_, err := io.ReadAll(r)
	if e, ok := AsError(err); !ok || e.Kind != KindElements {
		t.Fatalf("reading = %v, want an elements error", err)
	}
	src := &countingReader{}
	_, err = io.ReadAll(Limits{Bytes: 1000}.Reader(src))
	if e, ok := AsError(err); !ok || e.Kind != KindBytes {
		t.Fatalf("reading an endless source = %v, want a bytes error", err)
	}
	if src.n > 1001 {
		t.Fatalf("read %d bytes past a limit of 1000", src.n)
	}
	data, err := io.ReadAll(Limits{Bytes: int64(len(doc))}.Reader(strings.NewReader(doc)))
	if err != nil || string(data) != doc {
		t.Fatalf("a document exactly at the limit: %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"a":["\\\"[",[{}]]}`), 3, 4)
	f.Add([]byte(`[[[[`), 2, 2)
	f.Fuzz(func(t *testing.T, doc []byte, depth, elems int) {
		lim := Limits{Depth: depth, Elements: elems}
		err := lim.Check(doc)
		// Written in two pieces, the verdict is the same.
		s := NewScanner(lim)
		cut := len(doc) / 2
		_, err1 := s.Write(doc[:cut])
		if err1 == nil {
			_, err1 = s.Write(doc[cut:])
		}
		if (err == nil) != (err1 == nil) {
			t.Fatalf("whole: %v; in pieces: %v", err, err1)
		}
		// A valid document the gate passes is within its limits.
		if err == nil && json.Valid(doc) && depth > 0 {
			if d := depthOf(t, doc); d > depth {
				t.Fatalf("passed at depth %d over %d", d, depth)
			}
		}
	})
}
