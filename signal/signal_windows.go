package signal

import "os"

// defaultSignals is os.Interrupt alone, which Windows delivers for Ctrl-C
// and Ctrl-Break. Pass syscall.SIGTERM to New to also see the console's
// close, logoff and shutdown events, which Go reports as SIGTERM.
func defaultSignals() []os.Signal { return []os.Signal{os.Interrupt} }
