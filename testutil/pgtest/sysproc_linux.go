package pgtest

import "syscall"

// sysProcAttr runs postgres as cred and kills it if this process dies
// without stopping it.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}
