package main

import (
	"io"
	"os"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// TestTwoReplicas runs two `orchestra serve --http --stateless` on one
// PostgreSQL database with load at both and SIGKILLs one: every answered
// run is recorded as finished, the killed replica's runs in flight are
// interrupted, never before its lease lapsed, and the survivor keeps
// serving.
func TestTwoReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds orchestra and runs two replicas")
	}
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.RequireEnv) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	var log io.Writer = io.Discard
	if testing.Verbose() {
		log = os.Stderr
	}
	r, err := soakReplicas(t.Context(), replicaOptions{duration: 2 * time.Second, clients: 3, lease: 3 * time.Second, sleepMS: 200, root: "../.."}, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.problems() {
		t.Error(p)
	}
	t.Logf("%+v", *r)
}
