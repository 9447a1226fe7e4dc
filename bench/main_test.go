package main

import (
	"os"
	"testing"

	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

func TestMain(m *testing.M) {
	builtin.ServeWorker() // the test binary is its own evaluation worker
	os.Exit(m.Run())
}
