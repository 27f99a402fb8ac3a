//go:build unix || windows

package termsig

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// SignalName returns the conventional name of sig, such as "SIGTERM"
// (os.Signal's String gives "terminated"), "signal 40" for a system signal
// that has no name, or sig.String() for an os.Signal that is not a system
// signal. It is the name a [Notice] carries in JSON.
func SignalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := sysSignalName(s); name != "" {
			return name
		}
		return "signal " + strconv.Itoa(int(s))
	}
	return sig.String()
}

// signalByName returns the system signal that SignalName names name.
func signalByName(name string) (os.Signal, bool) {
	if s := sysSignalByName(name); s != 0 {
		return s, true
	}
	if n, ok := strings.CutPrefix(name, "signal "); ok {
		if i, err := strconv.Atoi(n); err == nil && i > 0 && i < 1<<16 {
			return syscall.Signal(i), true
		}
	}
	return nil, false
}

// isSysSignal reports whether sig can be named so that it decodes again.
func isSysSignal(sig os.Signal) bool {
	_, ok := sig.(syscall.Signal)
	return ok
}
