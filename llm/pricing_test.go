package llm

import (
	"math"
	"testing"
)

// TestPricesCost: a model is priced under its Name, its name alone, or
// the name its provider reported; an unknown one has no cost.
func TestPricesCost(t *testing.T) {
	p := Prices{"gpt-4o-mini": {Input: 0.15, Output: 0.6}, "openai:gpt-4o": {Input: 2.5, Output: 10}, "llama3:8b": {Input: 0, Output: 0}}
	u := Usage{InputTokens: 2000, OutputTokens: 500}
	for _, c := range []struct {
		names []string
		want  float64
		ok    bool
	}{
		{[]string{"openai:gpt-4o-mini"}, (2000*0.15 + 500*0.6) / 1e6, true},
		{[]string{"openai:gpt-4o"}, (2000*2.5 + 500*10) / 1e6, true},
		{[]string{"openai:gpt-4o-mini-2024-07-18", "gpt-4o-mini"}, (2000*0.15 + 500*0.6) / 1e6, true},
		{[]string{"openai:llama3:8b"}, 0, true}, // a free local model is known to cost 0
		{[]string{"openai:gpt-5"}, 0, false},
		{[]string{"sampling"}, 0, false},
		{[]string{"scripted:gpt-4o-mini"}, 0, false}, // only providers' names are cut
		{nil, 0, false},
	} {
		got, ok := p.Cost(u, c.names...)
		if ok != c.ok || math.Abs(got-c.want) > 1e-15 {
			t.Errorf("Cost(%v) = %v, %v; want %v, %v", c.names, got, ok, c.want, c.ok)
		}
	}
	var none Prices
	if _, ok := none.Cost(u, "openai:gpt-4o"); ok {
		t.Error("no pricing priced a model")
	}
}
