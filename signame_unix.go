//go:build unix

package termsig

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName returns the conventional name of sig, such as "SIGTERM"
// (os.Signal.String gives "terminated"), or sig.String() for a signal that
// has none.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}

// signalByName returns the signal named name, such as "SIGTERM".
func signalByName(name string) (os.Signal, bool) {
	s := unix.SignalNum(name)
	return s, s != 0
}
