package schemaload

import (
	"encoding/json"
	"testing"
)

func BenchmarkCheckValue(b *testing.B) {
	s, err := Load("b", json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"input":{}},"required":["query"]}`), DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	v := map[string]any{"query": ".x", "input": map[string]any{"x": "hello"}}
	for b.Loop() {
		if err := CheckValue(s, s, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckValueTree(b *testing.B) {
	tree, _ := Load("tree", json.RawMessage(`{"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`), DefaultLimits())
	var build func(d int) any
	build = func(d int) any {
		if d == 0 {
			return map[string]any{}
		}
		kids := make([]any, 4)
		for i := range kids {
			kids[i] = build(d - 1)
		}
		return map[string]any{"children": kids}
	}
	v := build(6)
	for b.Loop() {
		if err := CheckValue(tree, tree, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s, err := Load("b", json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"input":{}},"required":["query"]}`), DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	rs, _ := s.Resolve(nil)
	v := map[string]any{"query": ".x", "input": map[string]any{"x": "hello"}}
	for b.Loop() {
		if err := rs.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}
