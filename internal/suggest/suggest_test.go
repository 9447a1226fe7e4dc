package suggest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClosest(t *testing.T) {
	known := []string{"max_steps", "max_depth", "max_parallel", "json_query", "render"}
	for _, tc := range []struct {
		name string
		n    int
		want []string
	}{
		{"max_step", 1, []string{"max_steps"}},
		{"MAX_DEPTH", 2, []string{"max_depth"}},
		{"jsonquery", 1, []string{"json_query"}},
		{"rendr", 3, []string{"render"}},
		{"completely_else", 3, nil},
		{"query", 1, []string{"json_query"}},
	} {
		if got := Closest(tc.name, known, tc.n); !cmp.Equal(got, tc.want) {
			t.Errorf("Closest(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
