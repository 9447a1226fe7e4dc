// Package plural writes counts of things in English: "1 problem",
// "3 problems".
//
//	fmt.Sprintf("the plan has %s", plural.Count(len(issues), "problem"))
package plural

import "strconv"

// Count returns n followed by noun, with an s unless n is 1. noun is a
// singular that takes a plain s ("problem", "tool step").
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
