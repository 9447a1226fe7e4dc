package termtest

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Screen is a terminal's screen: its lines and its cursor. It is safe for
// concurrent use.
type Screen struct {
	mu       sync.Mutex
	lines    [][]rune
	row, col int
	pending  []byte // an escape sequence or a UTF-8 character cut by a write
	controls int
	changed  chan struct{} // closed by the next write, for Wait; nil until one waits
}

// Write applies p to the screen. It never fails.
func (s *Screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := append(s.pending, p...)
	s.pending = nil
	for len(b) > 0 {
		n := s.step(b)
		if n == 0 { // incomplete: wait for the rest
			s.pending = append([]byte(nil), b...)
			break
		}
		b = b[n:]
	}
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return len(p), nil
}

// Wait waits until ok reports true, asking it now and after each write to
// the screen, or until ctx is done, and returns ctx's error then. ok may
// read the screen.
func (s *Screen) Wait(ctx context.Context, ok func() bool) error {
	for {
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if ok() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// step applies the first character or sequence of b and returns how many
// bytes it took, or 0 if b holds only the start of one.
func (s *Screen) step(b []byte) int {
	switch b[0] {
	case '\r':
		s.col = 0
		return 1
	case '\n':
		s.row++
		return 1
	case '\b':
		s.col = max(s.col-1, 0)
		return 1
	case '\t':
		s.col = (s.col/8 + 1) * 8
		return 1
	case 0x1b:
		return s.escape(b)
	}
	if b[0] < 0x20 || b[0] == 0x7f {
		return 1 // other controls draw nothing
	}
	if !utf8.FullRune(b) {
		return 0
	}
	r, n := utf8.DecodeRune(b)
	s.put(r)
	return n
}

// escape applies the escape sequence at the start of b.
func (s *Screen) escape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	if b[1] != '[' {
		s.controls++
		return 2 // a two-byte sequence: nothing this screen draws
	}
	end := 2
	for end < len(b) && (b[end] < 0x40 || b[end] > 0x7e) {
		end++
	}
	if end == len(b) {
		return 0
	}
	params, final := string(b[2:end]), b[end]
	n := 1
	if v, err := strconv.Atoi(strings.SplitN(params, ";", 2)[0]); err == nil && v > 0 {
		n = v
	}
	if final != 'm' {
		s.controls++
	}
	switch final {
	case 'A':
		s.row = max(s.row-n, 0)
	case 'B':
		s.row += n
	case 'C':
		s.col += n
	case 'D':
		s.col = max(s.col-n, 0)
	case 'G':
		s.col = n - 1
	case 'J':
		if params == "" || params == "0" {
			s.clearLine()
			if s.row+1 < len(s.lines) {
				s.lines = s.lines[:s.row+1]
			}
		}
	case 'K':
		if params == "" || params == "0" {
			s.clearLine()
		}
	}
	return end + 1
}

// put writes r at the cursor and moves it right.
func (s *Screen) put(r rune) {
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, nil)
	}
	line := s.lines[s.row]
	for len(line) <= s.col {
		line = append(line, ' ')
	}
	line[s.col] = r
	s.lines[s.row] = line
	s.col++
}

// clearLine erases the cursor's line from the cursor on.
func (s *Screen) clearLine() {
	if s.row < len(s.lines) && s.col < len(s.lines[s.row]) {
		s.lines[s.row] = s.lines[s.row][:s.col]
	}
}

// Lines returns the screen's lines, without trailing spaces.
func (s *Screen) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.lines))
	for i, l := range s.lines {
		out[i] = strings.TrimRight(string(l), " ")
	}
	return out
}

// String returns the screen's lines, one per line.
func (s *Screen) String() string { return strings.Join(s.Lines(), "\n") }

// Find returns the last line on screen that contains substr.
func (s *Screen) Find(substr string) (string, bool) {
	lines := s.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], substr) {
			return lines[i], true
		}
	}
	return "", false
}

// Controls returns how many control sequences (colors aside) the screen
// was written: cursor movement, erasing and the like.
func (s *Screen) Controls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controls
}
