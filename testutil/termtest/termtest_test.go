package termtest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestScreen redraws lines in place as a progress display does: write
// rows, move up over them, erase below, write them again; split writes,
// colors and a character cut in two change nothing.
func TestScreen(t *testing.T) {
	var s Screen
	for _, chunk := range []string{
		"log line\r\n",
		"a  running 0.1s\r\nb  running 0.1s\r\n",
		"\x1b[2A\x1b[J",
		"a  \x1b[32m✓\x1b[0m success 0.2s\r\nb  run", "ning 0.2s\r\n",
		"\x1b[1A\x1b[Jb  done \xe2", "\x9c\x93\r\n",
	} {
		s.Write([]byte(chunk))
	}
	want := []string{"log line", "a  ✓ success 0.2s", "b  done ✓"}
	if diff := cmp.Diff(want, s.Lines()); diff != "" {
		t.Errorf("screen (-want +got):\n%s", diff)
	}
	if s.Controls() != 4 {
		t.Errorf("%d control sequences, want the 4 that move and erase", s.Controls())
	}
	if line, ok := s.Find("a "); !ok || line != "a  ✓ success 0.2s" {
		t.Errorf("Find = %q, %v", line, ok)
	}
	s.Write([]byte("\rxy\x1b[K"))
	if got := s.Lines()[3]; got != "xy" {
		t.Errorf("erasing the rest of a line: %q", got)
	}
}

// TestWait returns once a write shows what is waited for, and when its
// context ends before.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Screen
		shown := func() bool { _, ok := s.Find("ready"); return ok }
		waited := make(chan error, 1)
		go func() { waited <- s.Wait(t.Context(), shown) }()
		synctest.Wait()
		s.Write([]byte("not yet\r\n"))
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("Wait returned (%v) before the screen showed what it waits for", err)
		default:
		}
		s.Write([]byte("ready\r\n"))
		if err := <-waited; err != nil {
			t.Fatalf("Wait: %v", err)
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := s.Wait(ctx, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait past its deadline = %v, want context.DeadlineExceeded", err)
		}
	})
}
