// Package textcut shortens text for models and people without cutting a
// UTF-8 character in two.
package textcut

import "unicode/utf8"

// Marker ends text that [Truncate] shortened.
const Marker = "... (truncated)"

// Index returns the largest index i ≤ n at which s can be cut without
// splitting a UTF-8 character; n must be at most len(s).
func Index[T ~string | ~[]byte](s T, n int) int {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return n
}

// Truncate returns s when it is at most n bytes long, else its first n
// bytes or fewer, at a character's start, followed by [Marker].
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:Index(s, n)] + Marker
}

// Ellipsis returns s when it has at most n characters, else its first
// n-1 characters and "…", for labels that must fit a column.
func Ellipsis(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:max(n-1, 0)]) + "…"
}
