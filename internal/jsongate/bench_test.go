package jsongate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchDocs are a small request (an echo plan), and a 4 MiB one of
// records, as a client might send as bindings.
func benchDocs() map[string][]byte {
	echo := []byte(`{"plan":{"steps":[{"id":"a","tool":"json_query","arguments":{"query":".x","input":{"x":"hello"}}}]},"response":"compact"}`)
	var b strings.Builder
	b.WriteString(`{"plan":{"steps":[{"id":"a","tool":"json_query","arguments":{"query":"length","input":"$bindings.rows"}}]},"bindings":{"rows":[`)
	for i := 0; b.Len() < 4<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"row \"%d\"","tags":["a","b"],"score":%d.5}`, i, i, i)
	}
	b.WriteString(`]}}`)
	return map[string][]byte{"echo": echo, "4MiB": []byte(b.String())}
}

// BenchmarkGate compares the gate's pass with the decoding it guards.
func BenchmarkGate(b *testing.B) {
	docs := benchDocs()
	for _, name := range []string{"echo", "4MiB"} {
		doc := docs[name]
		b.Run(name+"/check", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if err := Default(8 << 20).Check(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/valid", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				json.Valid(doc)
			}
		})
		b.Run(name+"/unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				var v any
				if err := json.Unmarshal(doc, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
