//go:build unix && !linux

package mcpserver

import (
	"os/exec"
	"syscall"
)

// configureCmd puts the child in its own process group, so that it and
// its children can be killed together.
func configureCmd(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
