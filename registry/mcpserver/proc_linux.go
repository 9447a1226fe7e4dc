//go:build linux

package mcpserver

import (
	"os/exec"
	"syscall"
)

// configureCmd puts the child in its own process group, so that it and
// its children can be killed together, and has the kernel kill it when
// orchestra dies, even by SIGKILL. (Pdeathsig fires when the OS thread
// that started the child exits; the Go runtime only ends threads that a
// goroutine locked and did not unlock, which this package never does.)
func configureCmd(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
