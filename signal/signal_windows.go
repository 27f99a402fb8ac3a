package signal

import (
	"os"
	"syscall"
)

// defaultSignals is os.Interrupt, which Windows delivers for Ctrl-C and
// Ctrl-Break, and SIGTERM, which Go delivers for the console's close,
// logoff and shutdown events.
func defaultSignals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM} }
