package worker

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Supported reports whether workers run here: the kernel enforces
// RLIMIT_AS, so that a worker's allocations past its limit fail.
const Supported = true

// runtimeRoom is address space the Go runtime may need beyond the heap
// budget: its own structures, a new heap arena, goroutine stacks.
const runtimeRoom = 64 << 20

// limitAddressSpace caps this process's address space at what it uses now
// plus budget and room for the runtime: past it, the kernel refuses
// mappings, and the runtime dies with "out of memory" however large the
// allocation that asked. The cap is set on a running process rather than
// by the parent because a Go program reserves most of its address space
// as it starts, and how much depends on the build (the race detector's
// shadow memory multiplies it).
func limitAddressSpace(budget int64) error {
	base, err := addressSpace()
	if err != nil {
		return err
	}
	limit := base + uint64(budget+runtimeRoom)*raceFactor
	// A limit the parent was started under (prlimit, ulimit -v) may be
	// lower already; it cannot be raised.
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &cur); err == nil && cur.Max < limit {
		limit = cur.Max
	}
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}

// addressSpace reads this process's virtual memory size (VmSize).
func addressSpace() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmSize:")); ok {
			v = bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))
			kb, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading VmSize: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmSize in /proc/self/status")
}
