package cli

import (
	"strings"
	"testing"
)

// TestListenAddr: a non-loopback address needs authentication (server.auth)
// or --insecure; loopback addresses never do.
func TestListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr          string
		authenticated bool
		want, err     string
	}{
		{":8080", false, "127.0.0.1:8080", ""},
		{"localhost:8080", false, "localhost:8080", ""},
		{"[::1]:8080", false, "[::1]:8080", ""},
		{"0.0.0.0:8080", false, "", "without authentication"},
		{"192.0.2.1:8080", false, "", "without authentication"},
		{"0.0.0.0:8080", true, "0.0.0.0:8080", ""},
		{"nonsense", true, "", "invalid --http address"},
	} {
		got, err := listenAddr(tc.addr, tc.authenticated)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("listenAddr(%q, %v) = %q, %v; want an error with %q", tc.addr, tc.authenticated, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("listenAddr(%q, %v) = %q, %v; want %q", tc.addr, tc.authenticated, got, err, tc.want)
		}
	}
}

// TestServeNonLoopbackRefused: without tokens or --insecure, serve refuses
// a non-loopback address and says how to configure authentication.
func TestServeNonLoopbackRefused(t *testing.T) {
	var stdout, stderr strings.Builder
	code := Run(t.Context(), []string{"serve", "--http", "0.0.0.0:1"}, strings.NewReader(""), &stdout, &stderr)
	if code != ExitInvalid || !strings.Contains(stderr.String(), "server.auth") {
		t.Errorf("serve --http 0.0.0.0:1 without auth: exit %d, stderr %q; want a usage error naming server.auth", code, stderr.String())
	}
}
