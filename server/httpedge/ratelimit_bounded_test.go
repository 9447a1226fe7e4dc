package httpedge

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRateLimiterIsBounded: however many keys come, the limiter keeps at
// most maxBuckets buckets, dropping the least recently seen; a key seen
// lately keeps its bucket (and so its spent tokens).
func TestRateLimiterIsBounded(t *testing.T) {
	l := NewRateLimiter(1, 1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	for i := range maxBuckets + maxBuckets/2 {
		now = now.Add(time.Microsecond)
		l.allow(fmt.Sprint("key", i))
		if i == maxBuckets+maxBuckets/4 {
			l.allow("recent") // spends its only token
		}
	}
	if n := len(l.clients); n > maxBuckets {
		t.Errorf("%d buckets kept, more than %d", n, maxBuckets)
	}
	if ok, _ := l.allow("recent"); ok {
		t.Error("a recently seen key lost its bucket")
	}
}

// TestAddrKey: an IPv6 client is its /64, an IPv4 one its address.
func TestAddrKey(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:1234":                 "addr:192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443":     "addr:2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:4:5:6]:8080": "addr:2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:1":           "addr:::ffff:192.0.2.7",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if got := addrKey(r); got != want {
			t.Errorf("addrKey(%s) = %s, want %s", remote, got, want)
		}
	}
}
