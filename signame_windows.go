package termsig

import "syscall"

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

func sysSignalName(s syscall.Signal) string { return signalNames[s] }

func sysSignalByName(name string) syscall.Signal {
	for s, n := range signalNames {
		if n == name {
			return s
		}
	}
	return 0
}
