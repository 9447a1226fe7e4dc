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

// The credentials of any URL in text are cut out, known or not, however
// short: user information, and the query parameters named like
// credentials, in any case; other parameters and the rest of the text are
// kept.
func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://h:1/mcp?api_key=k3y&region=eu": refused`:                     `Post "http://h:1/mcp?api_key=[REDACTED]&region=eu": refused`,
		"https://s3/x?X-Amz-Credential=AK/1&X-Amz-Signature=ab12&X-Amz-Expires=60": "https://s3/x?X-Amz-Credential=[REDACTED]&X-Amz-Signature=[REDACTED]&X-Amz-Expires=60",
		"GET https://api/v1?Token=t0k#frag and more":                               "GET https://api/v1?Token=[REDACTED]#frag and more",
		"url=http://alice:pw@host/p?q=1 next":                                      "url=http://[REDACTED]@host/p?q=1 next",
		"ssh://git@github.com/x":                                                   "ssh://[REDACTED]@github.com/x",
		"a=b&access_token=xyz&sig=1&pwd=2&code=3&codec=4":                          "a=b&access_token=[REDACTED]&sig=[REDACTED]&pwd=[REDACTED]&code=[REDACTED]&codec=4",
		"?password=": "?password=",
		"plain text, a=1 and mail bob@example.com":           "plain text, a=1 and mail bob@example.com",
		`{"url":"https://x/y?client_secret=s3\u0026page=2"}`: `{"url":"https://x/y?client_secret=[REDACTED]\u0026page=2"}`,
	} {
		if got := URLs(in); got != want {
			t.Errorf("URLs(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	if got := New("longer-secret").String("key longer-secret at https://h/?auth=x"); got != "key [REDACTED] at https://h/?auth=[REDACTED]" {
		t.Errorf("String = %q", got)
	}
}

// BenchmarkString measures redacting a typical log line, without URL and
// with one:
//
//	go test -run '^$' -bench String ./internal/redact/
func BenchmarkString(b *testing.B) {
	s := New("a-secret-value-1234", "another-one-5678")
	for name, line := range map[string]string{
		"no url": `time=2026-11-27T05:02:13Z level=INFO msg="step ended" request_id=0b6c2d0e exec_id=8450c61b step_id=q tool=json_query status=success duration=3ms`,
		"url":    `time=2026-11-27T05:02:13Z level=WARN msg="downstream server not ready" server=web err="Post \"http://127.0.0.1:1/mcp?api_key=k3y&region=eu\": connection refused"`,
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				s.String(line)
			}
		})
	}
}
