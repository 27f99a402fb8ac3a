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
// On Windows only os.Interrupt is watched by default.
//
// Every signal received is its own notice: a second SIGINT is a second
// notice, which a consumer may take as "stop now".
package signal
