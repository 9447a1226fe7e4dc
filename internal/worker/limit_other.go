//go:build !linux

package worker

import "errors"

// Supported reports whether workers run here. Only Linux is supported: it
// enforces RLIMIT_AS, which macOS accepts but does not enforce and Windows
// lacks, and without it a worker's memory would not be bounded.
const Supported = false

func limitAddressSpace(int64) error {
	return errors.New("workers are not supported on this platform")
}
