// Package termtest reads what a program drew on a terminal, for tests of
// terminal output. A [Screen] is written what the program wrote to its
// terminal (the other side of a pseudo-terminal, say) and applies the text
// and the control sequences that programs which redraw lines in place
// use: carriage return, newline, backspace, cursor movement, erasing the
// display below the cursor or the rest of a line; colors and other
// sequences are skipped. It keeps every line, scrolled off or not.
//
//	var s termtest.Screen
//	io.Copy(&s, ptmx)
//	line, ok := s.Find("step a")
//	err := s.Wait(ctx, func() bool { _, ok := s.Find("done"); return ok })
package termtest
