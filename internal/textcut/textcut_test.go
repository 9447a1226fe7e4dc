package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc" + Marker},
		{"日本語", 4, "日" + Marker}, // 4 is inside 本
		{"日本語", 3, "日" + Marker},
		{"é", 1, Marker},
		{"abc", 0, Marker},
	} {
		got := Truncate(c.s, c.n)
		if got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q is not valid UTF-8", c.s, c.n, got)
		}
	}
}

func TestIndexBytes(t *testing.T) {
	b := []byte("a🎵b")
	for n := 0; n <= len(b); n++ {
		i := Index(b, n)
		if i > n || !utf8.Valid(b[:i]) {
			t.Errorf("Index(%q, %d) = %d", b, n, i)
		}
	}
}

func TestEllipsis(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer label", 8, "a longe…"},
		{"ééééé", 3, "éé…"},
	} {
		if got := Ellipsis(c.s, c.n); got != c.want {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
