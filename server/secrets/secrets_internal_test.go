package secrets

import "testing"

// The prefilter may only ever let the credential expression run less often
// where it could not match: on every string it matches, the filter says yes.
func TestMayHoldCredentialNeverHidesAMatch(t *testing.T) {
	for _, s := range []string{
		"Authorization: Bearer abcdef", "BEARER xyz123", "basic dXNlcjpwYXNz", "x Basic   abcd==",
		"bearer", "basic", "no credential here", "", "b", "beare", "BaSiC abcd", "…Bearer äbcd efgh1234",
	} {
		if credentialText.MatchString(s) && !mayHoldCredential(s) {
			t.Errorf("mayHoldCredential(%q) = false, but the expression matches it", s)
		}
	}
	for _, s := range []string{"step s1 started", "exec_id 1234", "tool fx__echo", ""} {
		if mayHoldCredential(s) {
			t.Errorf("mayHoldCredential(%q) = true for a string with neither word", s)
		}
	}
}

func FuzzMayHoldCredential(f *testing.F) {
	f.Add("Bearer abcdef")
	f.Add("plain text")
	f.Fuzz(func(t *testing.T, s string) {
		if credentialText.MatchString(s) && !mayHoldCredential(s) {
			t.Fatalf("mayHoldCredential(%q) = false, but the expression matches it", s)
		}
	})
}

func TestIsSecretKeyAgreesWithTheExpression(t *testing.T) {
	for _, k := range []string{"authorization", "request_id", "api_key", "Headers", "env", "environment", "tool", "password"} {
		for range 2 { // the second answer comes from the cache
			if got, want := isSecretKey(k), secretKey.MatchString(k); got != want {
				t.Errorf("isSecretKey(%q) = %v, want %v", k, got, want)
			}
		}
	}
}
