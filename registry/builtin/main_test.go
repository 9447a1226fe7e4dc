package builtin

import (
	"os"
	"testing"
)

// testOpts are the options of the tools the tests make: they share one
// set of workers, as a program's tools do.
var testOpts = Options{Workers: &Workers{}}

func TestMain(m *testing.M) {
	ServeWorker() // the test binary is its own evaluation worker
	code := m.Run()
	testOpts.Workers.Close()
	os.Exit(code)
}
