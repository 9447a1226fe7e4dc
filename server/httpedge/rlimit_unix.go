//go:build unix

package httpedge

import "syscall"

// openFileLimit returns the process's limit of open files, or 0 when it
// cannot be read.
func openFileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}
