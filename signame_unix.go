//go:build unix

package termsig

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func sysSignalName(s syscall.Signal) string { return unix.SignalName(s) }

func sysSignalByName(name string) syscall.Signal { return unix.SignalNum(name) }
