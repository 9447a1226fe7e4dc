//go:build !unix

package worker

import (
	"fmt"
	"os"
)

// Serve runs this process as a worker; on this platform workers are not
// supported, and it exits with an error.
func Serve(map[string]Handler) {
	fmt.Fprintln(os.Stderr, "worker: not supported on this platform")
	os.Exit(1)
}
