package viewer

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
)

// TestRunRowCost: a run's row shows its cost next to its tokens only when
// the cost is known.
func TestRunRowCost(t *testing.T) {
	v := &Viewer{}
	cost := 0.004671
	priced := v.runsRow(&store.Run{ExecID: "e", TokensIn: 1700, TokensOut: 310, CostUSD: &cost}, time.Now())
	if priced.Tokens != "1700 in · 310 out · $0.004671" {
		t.Errorf("a priced run's row: %q", priced.Tokens)
	}
	unpriced := v.runsRow(&store.Run{ExecID: "e", TokensIn: 1700, TokensOut: 310}, time.Now())
	if strings.Contains(unpriced.Tokens, "$") {
		t.Errorf("an unpriced run's row shows a cost: %q", unpriced.Tokens)
	}
}
