package llm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// ErrInvalidState reports a request state that was not signed with the
// server's key: altered, forged, or issued by another server.
var ErrInvalidState = errors.New("invalid request state")

// SignState returns state with an HMAC-SHA256 signature under key, as an
// opaque string for the RequestState of a multi round-trip result. The
// state is signed, not encrypted: the client can read it but not change it.
func SignState(key, state []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString(state) + "." + enc.EncodeToString(stateMAC(key, state))
}

// VerifyState checks a string made by [SignState] with the same key and
// returns the state. Any other string is an error matching [ErrInvalidState].
func VerifyState(key []byte, signed string) ([]byte, error) {
	enc := base64.RawURLEncoding
	body, sig, ok := strings.Cut(signed, ".")
	if !ok {
		return nil, ErrInvalidState
	}
	state, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, stateMAC(key, state)) {
		return nil, ErrInvalidState
	}
	return state, nil
}

func stateMAC(key, state []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("orchestra-llm-state-v1\x00"))
	h.Write(state)
	return h.Sum(nil)
}
