// Package logind hears a shutdown from systemd-logind and holds it, with a
// delay lock, while the program hands back its work.
//
// On a systemd host every orderly shutdown goes through logind: a
// power-button press that logind handles, `shutdown -h`, `systemctl
// poweroff` or `reboot`, and a cloud's stop or preemption delivered as
// one of those. Before it goes ahead, logind announces it on the system
// bus with PrepareForShutdown(true) and waits until every "delay"
// inhibitor lock is closed, or InhibitDelayMaxSec (5 s unless configured)
// has passed, before systemd starts stopping services. A program that holds
// such a lock hears about the shutdown before its SIGTERM and has that
// long to finish; when it is done it closes the lock and the shutdown goes
// on at once. This is the one way both to hear a shutdown and to hold it.
//
// # Notices
//
// logind sends PrepareForShutdownWithMetadata(true, {"type": …}) and then
// PrepareForShutdown(true) (an older logind only the latter); the source
// sends one notice per shutdown:
//
//   - type poweroff or halt, a type it does not know, or no type (an older
//     logind): [termsig.Terminate];
//   - reboot, kexec or soft-reboot: [termsig.Reboot];
//   - Event: [EventPrefix] and the type ("shutdown/poweroff"), or
//     [EventShutdown] ("shutdown") when the type is not said;
//   - Deadline: when the notice was seen plus logind's
//     InhibitDelayMaxUSec (zero if that is "infinity"): when logind stops
//     waiting for the delay locks and the shutdown proceeds. That is when
//     systemd starts stopping services, not when the process dies: a
//     service then gets SIGTERM, and TimeoutStopSec (90 s by default)
//     before SIGKILL. It is the time to be done by so that the shutdown
//     is not held up, 5 s unless the operator raised it (see below); a
//     drain that keeps a margin larger than that has no time left;
//   - Reason says whether the source holds a delay lock.
//
// When logind cancels a shutdown (PrepareForShutdown(false), such as
// after `shutdown -c`), the source sends [termsig.Cleared] with the same
// Event, and takes a new lock at once if the old one was released.
//
// # The lock and Release
//
// Watch takes the delay lock for "shutdown" before it calls
// [termsig.Run.Ready], and [Source.Traits] says that this first look is
// local, so termsig.New returns with the lock held: a shutdown that
// begins right after is both heard and held. [Config.Who] and
// [Config.Why] describe it to the operator (`systemd-inhibit --list`).
//
// The source is a [termsig.Releaser]: once the program has handed back its
// work, termsig.Notifier.Release with the notice closes the lock, and the
// shutdown goes on. Stop, and the process's exit, release too. The lock's
// descriptor is close-on-exec, so the program's children never hold it.
//
// The delay is logind's to set: to give a program more time, raise
// InhibitDelayMaxSec in a logind.conf drop-in (such as
// /etc/systemd/logind.conf.d/termsig.conf with "[Login]" and
// "InhibitDelayMaxSec=120"). The time before the shutdown is the delay,
// plus the service's TimeoutStopSec once systemd stops it.
//
// logind refuses new locks while a shutdown is under way: a source that
// connects then sends a Terminate notice at once (its Event is
// "shutdown", since the type is not shown, and its Deadline is now, since
// when logind began to wait is not known), held only if it kept a lock
// from before. If no lock can be had for another reason (polkit's
// org.freedesktop.login1.inhibit-delay-shutdown, which systemd's default
// policy grants to everyone, says no; Inhibit does not answer), the
// source still hears shutdowns; the failure shows in
// termsig.Notifier.Status, is logged once, and the lock is tried again
// with backoff.
//
// A lock holds every shutdown of the host until it is released, for up to
// the delay: a program that only reports shutdowns, or that cannot release
// in time, sets [Config.NoLock] to hear them without holding them.
//
// # Trust
//
// Any process on the system bus can send a signal named
// PrepareForShutdown, to everyone or to this program alone. The source
// believes only those whose sender is the unique name that owns
// org.freedesktop.login1, which the bus daemon stamps and nobody can
// forge. Others are ignored and logged once per connection. Signals of
// the wrong shape are ignored. Signals are filtered as they are read, so a
// flood of them costs neither memory nor goroutines; and the connection
// the source listens on does not take file descriptors (the bus refuses
// to pass it any), so a flood of messages that carry them cannot fill the
// program's descriptor table. The lock is taken on a connection of its
// own, closed after the call; descriptors that anyone else sends that
// connection meanwhile are closed as they come. (godbus takes a
// message's descriptors in with its first bytes: an Inhibit answer cut
// off half read when the call is abandoned would stay open. The source
// lets an answer on its way in for 10 ms before it closes the connection,
// which closed every lock in 400 trials of Stop at the moment of the
// answer; a descriptor nested in a variant is not shown by godbus at all.)
//
// # Failures
//
// Watch returns an error wrapping [termsig.ErrUnavailable] when this is
// not Linux, when the system bus's socket does not exist, or when the
// first connection finds no logind on the bus. Once it has connected, the
// bus or logind going away is a transient failure, reported with
// [termsig.Run.Report] while it lasts: the source reconnects with backoff
// (100 ms doubling to 10 s), handing over the notices that wait for the
// consumer meanwhile, subscribes again, takes a new lock, and catches up
// with a shutdown that began or was cancelled meanwhile (logind's
// PreparingForShutdown property). A new logind on the bus (it restarted)
// is met the same way, at once, on the same connection: its
// InhibitDelayMaxUSec is read again, and signals it sent right after it
// took the name wait until then.
// A lock held across a reconnection is kept until the new one is taken.
// Connecting and every call are bounded by [Config.RequestTimeout], and
// Stop ends any of them at once.
//
// # Address
//
// The bus is [Config.Address], else $DBUS_SYSTEM_BUS_ADDRESS, else
// [DefaultAddress] (/var/run/dbus/system_bus_socket) below [Config.Root].
// A program in a container reaches the host's logind by mounting the
// host's bus socket and pointing Address (or Root) at it.
//
// # Testing
//
// Package logindtest runs a private dbus-daemon and a fake logind on it,
// which hands out real delay locks and shows when each is released.
package logind
