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
//
// # Deadlines
//
// A SIGTERM's notice has a Deadline, Observed plus the time the process
// has before it is killed, when one of these says it, the first that
// does:
//
//   - [Config.StopTimeout] (negative: no deadline, and nothing else is
//     asked);
//   - the environment variable TERMSIG_STOP_TIMEOUT ([StopTimeoutEnv]),
//     whole seconds or a Go duration, for the platforms that know the time
//     but do not tell it: Kubernetes' terminationGracePeriodSeconds (less
//     any preStop hook, which runs first within it), ECS's stopTimeout,
//     `docker stop -t`; a value it cannot read is logged and gives no
//     deadline;
//   - systemd, for a process of a system service: the unit's
//     TimeoutStopUSec, read once when Watch starts, for the unit's
//     KillSignal (SIGTERM unless the unit says otherwise, and then that
//     signal has the deadline and SIGTERM none).
//
// Without any, there is none. The deadline is the service manager's
// timeout, not a guess about the sender: a SIGTERM sent by someone else
// (kill, a supervisor) gets the same one. SIGINT and SIGHUP have none.
//
// # systemd
//
// Watch asks systemd over the system bus (GetUnitByPID, then the unit's
// properties) in the background, within [Config.LookupTimeout]: New and
// Stop never wait for it, and a signal that comes before it has answered
// waits at most that long, keeping as Observed the time it came. The unit
// counts if this process is its main process or has its INVOCATION_ID;
// else (a login session's scope, a user service, whose stop timeout is on
// the user's bus) there is no deadline, nor is there for a unit that never
// kills (TimeoutStopSec=infinity, SendSIGKILL=no, KillMode=none).
// [Config.Logger] has one line with what was found, or why nothing was
// for a process with an INVOCATION_ID. The lookup never fails the
// source: for such a process a failure that may pass (the bus or systemd
// slow, restarting, gone) shows in termsig.Notifier.Status meanwhile and
// is retried with backoff; without one, a single quiet attempt is made.
//
// EXTEND_TIMEOUT_USEC does not move the deadline: systemd shows the
// extension nowhere on the bus (TimeoutStopUSec stays what the unit
// says); the program that sends it knows its own extension.
//
// Package systemdtest runs a private dbus-daemon and a fake systemd on
// it, for tests.
package signal
