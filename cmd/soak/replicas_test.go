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
	log := replicasLog(t)
	r, err := soakReplicas(t.Context(), replicaOptions{duration: 2 * time.Second, clients: 3, lease: 3 * time.Second, sleepMS: 200, root: "../.."}, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.problems() {
		t.Error(p)
	}
	t.Logf("%+v", *r)
}

// replicasLog skips t in -short mode, and without PostgreSQL unless
// pgtest.RequireEnv asks for it, and returns where the replicas log: stderr
// with -v, nowhere otherwise.
func replicasLog(t *testing.T) io.Writer {
	t.Helper()
	if testing.Short() {
		t.Skip("builds orchestra and runs two replicas")
	}
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.RequireEnv) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}
