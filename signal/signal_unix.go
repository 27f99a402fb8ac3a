//go:build !windows

package signal

import (
	"os"
	"syscall"
)

func defaultSignals() []os.Signal {
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}
}
