package redact

import "strings"

// Query parameters that carry credentials. A parameter is one when its
// name, in lower case, contains one of SecretParamWords or is one of
// SecretParamNames: api_key, apiKey, access_token, client_secret,
// X-Amz-Signature, X-Amz-Credential, password, auth, sig, code... Their
// values are cut out of every URL in text that [Secrets.String] redacts,
// known secrets or not, however short.
var (
	SecretParamWords = []string{"key", "token", "secret", "signature", "password", "passwd", "auth", "credential", "session", "jwt"}
	SecretParamNames = []string{"sig", "pwd", "code"}
)

// secretParam reports whether a query parameter named name carries a
// credential.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, w := range SecretParamWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	for _, n := range SecretParamNames {
		if name == n {
			return true
		}
	}
	return false
}

// URLs returns text with the credentials of the URLs in it replaced by
// Marker: the user information of scheme://user:password@host, and the
// values of the query parameters that carry credentials (SecretParamWords,
// SecretParamNames), wherever a "?" or "&" starts one. Other parameters
// are kept: a URL still says where it leads.
func URLs(text string) string {
	if !strings.Contains(text, "=") && !strings.Contains(text, "@") {
		return text
	}
	var b strings.Builder
	last := 0 // text[:last] is written
	cut := func(from, to int) {
		b.WriteString(text[last:from])
		b.WriteString(Marker)
		last = to
	}
	for i := 0; i < len(text); i++ {
		switch {
		case strings.HasPrefix(text[i:], "://"):
			start := i + 3
			end := start + strings.IndexFunc(text[start:], endOfAuthority)
			if end < start {
				end = len(text)
			}
			if at := strings.LastIndexByte(text[start:end], '@'); at > 0 {
				cut(start, start+at)
			}
			i = end - 1
		case text[i] == '?' || text[i] == '&':
			start := i + 1
			eq := strings.IndexFunc(text[start:], endOfName)
			if eq <= 0 || text[start+eq] != '=' || !secretParam(text[start:start+eq]) {
				continue
			}
			from := start + eq + 1
			to := from + strings.IndexFunc(text[from:], endOfValue)
			if to < from {
				to = len(text)
			}
			if to > from {
				cut(from, to)
			}
			i = to - 1
		}
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// endOfAuthority ends the authority of a URL: host, port and user
// information.
func endOfAuthority(r rune) bool {
	return r == '/' || r == '?' || r == '#' || endOfValue(r)
}

// endOfName ends a query parameter's name.
func endOfName(r rune) bool { return r == '=' || r == '?' || endOfValue(r) }

// endOfValue ends a query parameter's value in text: the next parameter,
// the fragment, or what cannot be in a URL (space, quotes, brackets).
func endOfValue(r rune) bool {
	switch r {
	case '&', '#', ' ', '\t', '\n', '\r', '"', '\'', '`', '<', '>', '(', ')', '[', ']', '{', '}', '\\':
		return true
	}
	return false
}
