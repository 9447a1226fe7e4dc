// Package redact cuts secrets out of text before it leaves the process:
// logs, error messages, records. The secrets are the values it is given,
// and, in any URL, the user information and the values of the query
// parameters named like credentials (SecretParamWords, SecretParamNames).
//
//	s := redact.New("hunter2-token", os.Getenv("API_KEY"))
//	msg := s.String("401: bad key hunter2-token") // "401: bad key [REDACTED]"
package redact

import (
	"slices"
	"strings"
)

// Marker replaces a secret.
const Marker = "[REDACTED]"

// MinLength is the shortest value treated as a secret: shorter ones would
// cut ordinary words out of text.
const MinLength = 4

// Secrets is a set of secret values, longest first, so that a secret that
// contains another is replaced whole.
type Secrets []string

// New returns the secrets among values: those of MinLength bytes or more,
// each once.
func New(values ...string) Secrets {
	var s Secrets
	for _, v := range values {
		if len(v) >= MinLength && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	slices.SortStableFunc(s, func(a, b string) int { return len(b) - len(a) })
	return s
}

// String returns text with every secret replaced by Marker, and the
// credentials of the URLs in it too ([URLs]), whether they are known
// secrets or not.
func (s Secrets) String(text string) string {
	for _, sec := range s {
		if strings.Contains(text, sec) {
			text = strings.ReplaceAll(text, sec, Marker)
		}
	}
	return URLs(text)
}

// Error returns err with its message redacted, still wrapping err; err
// itself when its message holds no secret.
func (s Secrets) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := s.String(msg); red != msg {
		return &redacted{err: err, msg: red}
	}
	return err
}

type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
