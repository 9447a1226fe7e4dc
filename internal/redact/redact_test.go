package redact

import (
	"errors"
	"fmt"
	"testing"
)

func TestSecrets(t *testing.T) {
	s := New("abc", "token-1234", "token-1234-extended", "token-1234")
	if len(s) != 2 || s[0] != "token-1234-extended" {
		t.Fatalf("New = %q", s)
	}
	if got := s.String("a token-1234-extended and token-1234 and abc"); got != "a [REDACTED] and [REDACTED] and abc" {
		t.Errorf("String = %q", got)
	}
	base := errors.New("cause")
	err := s.Error(fmt.Errorf("calling with token-1234: %w", base))
	if err.Error() != "calling with [REDACTED]: cause" || !errors.Is(err, base) {
		t.Errorf("Error = %v (wraps the cause: %v)", err, errors.Is(err, base))
	}
	if s.Error(base) != base || s.Error(nil) != nil {
		t.Error("an error without secrets must be returned as it is")
	}
}
