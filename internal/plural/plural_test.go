package plural

import "testing"

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 problems", 1: "1 problem", 2: "2 problems", 12: "12 problems"} {
		if got := Count(n, "problem"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
