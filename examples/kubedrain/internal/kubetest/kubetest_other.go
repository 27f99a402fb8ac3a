//go:build !linux

package kubetest

import "syscall"

// sysProcAttr is nil: [Start] skips tests on this system.
func sysProcAttr() *syscall.SysProcAttr { return nil }
