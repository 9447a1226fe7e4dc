//go:build !linux

package pgtest

import "syscall"

// sysProcAttr runs postgres as cred.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
