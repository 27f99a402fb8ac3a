//go:build !unix && !windows

package termsig

import "os"

// SignalName returns sig.String(): this system has no signal names.
func SignalName(sig os.Signal) string { return sig.String() }

func signalByName(string) (os.Signal, bool) { return nil, false }

func isSysSignal(os.Signal) bool { return false }
