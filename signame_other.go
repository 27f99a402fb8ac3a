//go:build !unix

package termsig

import (
	"os"
	"syscall"
)

// The signals that the syscall package defines on every system; Go
// delivers os.Interrupt (SIGINT) and SIGTERM on Windows.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP:  "SIGHUP",
	syscall.SIGINT:  "SIGINT",
	syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL:  "SIGILL",
	syscall.SIGTRAP: "SIGTRAP",
	syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS:  "SIGBUS",
	syscall.SIGFPE:  "SIGFPE",
	syscall.SIGKILL: "SIGKILL",
	syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM",
	syscall.SIGTERM: "SIGTERM",
}

// signalName returns the conventional name of sig, such as "SIGTERM", or
// sig.String() for a signal that has none.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name, ok := signalNames[s]; ok {
			return name
		}
	}
	return sig.String()
}

// signalByName returns the signal named name, such as "SIGTERM".
func signalByName(name string) (os.Signal, bool) {
	for s, n := range signalNames {
		if n == name {
			return s, true
		}
	}
	return nil, false
}
