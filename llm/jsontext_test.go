package llm_test

import (
	"errors"
	"testing"

	"github.com/orchestra-mcp/orchestra/llm"
)

func TestExtractJSON(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{"```json\n{\"a\": 1}\n```", `{"a": 1}`},
		{"Here is the plan:\n```\n{\"a\": [1, 2]}\n```\nDone.", `{"a": [1, 2]}`},
		{`Sure! {"a": {"b": "}"}} hope that helps`, `{"a": {"b": "}"}}`},
		{"```json\n{\"a\": 1}", `{"a": 1}`},
		{`[1, 2]`, `[1, 2]`},
		{`{broken {"ok": true}`, `{"ok": true}`},
	} {
		got, err := llm.ExtractJSON(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("ExtractJSON(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "no json here", "{unterminated"} {
		if got, err := llm.ExtractJSON(in); err == nil {
			t.Errorf("ExtractJSON(%q) = %s, want an error", in, got)
		}
	}
}

func TestSignState(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	signed := llm.SignState(key, []byte(`{"round":1}`))
	got, err := llm.VerifyState(key, signed)
	if err != nil || string(got) != `{"round":1}` {
		t.Fatalf("VerifyState = %s, %v", got, err)
	}
	forged := llm.SignState([]byte("another key of the same length!!"), []byte(`{"round":9}`))
	body, sig, _ := cut(signed)
	fbody, _, _ := cut(forged)
	for name, s := range map[string]string{
		"other key":     forged,
		"altered state": fbody + "." + sig,
		"no signature":  body,
		"empty":         "",
		"garbage":       "!!.??",
	} {
		if _, err := llm.VerifyState(key, s); !errors.Is(err, llm.ErrInvalidState) {
			t.Errorf("%s: error = %v, want ErrInvalidState", name, err)
		}
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
