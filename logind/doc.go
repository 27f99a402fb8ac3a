// Package logind hears a shutdown from systemd-logind and holds it, with a
// delay lock, while the program hands back its work.
//
// On a systemd host every orderly shutdown (the power button, `shutdown
// -h`, `systemctl poweroff` or `reboot`, a cloud's stop or preemption)
// goes through logind. It announces the shutdown on the system bus with
// PrepareForShutdown(true), then waits until every "delay" inhibitor lock
// is closed, or InhibitDelayMaxSec (5 s unless configured) has passed,
// before systemd starts stopping services. A program that holds such a
// lock hears of the shutdown before its SIGTERM and has that long to finish.
//
// # Notices
//
// One notice per shutdown, from PrepareForShutdownWithMetadata(true,
// {"type": …}) or, on an older logind, PrepareForShutdown(true):
//
//   - Kind: [termsig.Reboot] for reboot, kexec or soft-reboot;
//     [termsig.Terminate] for poweroff, halt, an unknown type or none;
//   - Event: [EventPrefix] and the type ("shutdown/poweroff"), or
//     [EventShutdown] when the type is not said;
//   - Deadline: when logind stops waiting for delay locks and systemd
//     starts stopping services, not when the process dies: the notice's
//     time plus InhibitDelayMaxUSec while a delay lock (anyone's) holds
//     the shutdown, else the notice's time (a source without a lock asks
//     ListInhibitors, within 0.5 s; unknown counts as none);
//   - Reason says whether a delay lock holds the shutdown.
//
// When logind cancels a shutdown (PrepareForShutdown(false), as after
// `shutdown -c`), the source sends [termsig.Cleared] with the same Event,
// and takes a new lock at once if the old one was released.
//
// # Scheduled shutdowns
//
// A shutdown scheduled ahead (`shutdown -h +5`) is logind's
// ScheduledShutdown, read at connect, every [Config.ScheduledInterval]
// and on PropertiesChanged. It is advice:
//
//   - [termsig.Maintenance], Event [EventScheduled] and the type
//     ("scheduled/poweroff"), Deadline the scheduled time; again, with the
//     same Event, when the time changes;
//   - [termsig.Cleared] with that Event once logind no longer has it
//     (cancelled, a dry run's time come, or another type instead).
//
// When the time comes, the shutdown's notice (above) follows.
//
// # The lock and Release
//
// Watch takes the delay lock for "shutdown" before it calls
// [termsig.Run.Ready], and [Source.Traits] makes termsig.New wait for it:
// a shutdown that begins right after New returns is both heard and held.
// [Config.Who] and [Config.Why] describe the lock to the operator
// (`systemd-inhibit --list`). The source is a [termsig.Releaser]:
// [Source.Release] closes the lock and the shutdown goes on at once.
// A lock holds every shutdown of the host for up to the delay;
// [Config.NoLock] hears shutdowns without holding them. To give a
// program more time, raise InhibitDelayMaxSec in a logind.conf drop-in.
//
// A source that connects while a shutdown is under way (logind then
// refuses new locks) sends a Terminate notice at once, with Event
// "shutdown" and Deadline now, held only if it kept a lock from before.
// A lock refused otherwise, or unanswered, is retried with backoff (the
// failure in Status, logged once); shutdowns are still heard.
//
// # Trust
//
// Only signals whose sender owns org.freedesktop.login1 (the bus daemon
// stamps it) are believed; others are ignored and logged once per
// connection, and signals of the wrong shape are ignored. A schedule is
// taken only from logind's answer to a read; one that does not parse
// changes nothing. A flood of signals costs neither memory nor
// goroutines, nor descriptors (DESIGN.md says how).
//
// # Failures
//
// Watch returns an error wrapping [termsig.ErrUnavailable] when this is
// not Linux, when the system bus's socket does not exist, or when the
// first connection finds no logind on the bus. After that, the bus or
// logind going away (or logind restarting) is a transient failure,
// reported with [termsig.Run.Report] while it lasts: the source
// reconnects with backoff (at most 10 s apart), subscribes again, takes a
// new lock (keeping the old one until then), rereads InhibitDelayMaxUSec
// and ScheduledShutdown, and catches up with a shutdown that began or was
// cancelled meanwhile; waiting notices are still handed over. Connecting and
// each call are bounded by [Config.RequestTimeout]; Stop ends them at once.
//
// The bus is [Config.Address], else $DBUS_SYSTEM_BUS_ADDRESS, else
// [DefaultAddress] below [Config.Root]. Package logindtest runs a private
// bus with a fake logind, or the real systemd-logind, for tests.
package logind
