package worker

import (
	"os/exec"
	"syscall"
)

// configure puts a worker in its own process group, so that a signal
// meant for the server's group (Ctrl-C in a terminal) does not end a job
// the server is waiting for, and has the kernel kill it when the server
// dies, even by SIGKILL.
func configure(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
