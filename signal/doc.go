// Package signal reports POSIX signals as termsig notices.
//
// # Meanings
//
// The default signals keep their distinct meanings all the way to the
// notice, because confusing them leaves fleets dead or half-stopped:
//
//   - SIGTERM: [termsig.Terminate], "stop for good" (systemd's stop, a
//     container runtime's stop, kill).
//   - SIGINT: [termsig.Interrupt], an operator's Ctrl-C.
//   - SIGHUP: [termsig.Reload], "finish, then restart in place". It is not
//     imminent, so [termsig.NotifyContext] does not cancel on it.
//
// Each notice's Event is the signal's name, such as "SIGTERM".
//
// # Operating systems
//
// On Linux and macOS the defaults are SIGTERM, SIGINT and SIGHUP. On
// Windows they are os.Interrupt (Ctrl-C and Ctrl-Break) and SIGTERM, which
// Go delivers when the console window is closed, the user logs off or the
// system shuts down; a Windows service's stop request is not a signal and
// is not seen. Any other os.Signal can be watched with [New] or [NewMap].
//
// Every signal received is its own notice: a second SIGINT is a second
// notice, which a consumer may take as "stop now".
package signal
