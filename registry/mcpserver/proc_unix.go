//go:build unix

package mcpserver

import (
	"os/exec"
	"syscall"
)

// killGroup kills the process group led by cmd's process: the server and
// anything it started that stayed in its group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
