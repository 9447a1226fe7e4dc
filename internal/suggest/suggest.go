// Package suggest finds the known names closest to a mistyped one, for
// error messages that say "did you mean ...?".
//
//	suggest.Closest("max_step", []string{"max_steps", "max_depth"}, 1) // ["max_steps"]
package suggest

import (
	"slices"
	"strings"
)

// Closest returns up to n of known closest to name, best first, among those
// close enough to be a plausible typo: a small edit distance (ignoring case),
// or one containing the other.
func Closest(name string, known []string, n int) []string {
	type cand struct {
		s string
		d int
	}
	var cs []cand
	lname := strings.ToLower(name)
	limit := max(2, len(name)/3)
	for _, k := range known {
		lk := strings.ToLower(k)
		d := Distance(lname, lk)
		if d <= limit || (len(lname) >= 3 && strings.Contains(lk, lname)) || (len(lk) >= 3 && strings.Contains(lname, lk)) {
			cs = append(cs, cand{k, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.s, b.s)
	})
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].s)
	}
	return out
}

// Distance is the Levenshtein distance between a and b. Strings longer than
// 256 bytes are compared only for equality, to bound the cost.
func Distance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		if a == b {
			return 0
		}
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
