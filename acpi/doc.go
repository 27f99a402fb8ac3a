// Package acpi reports presses of the ACPI power button as termsig
// notices.
//
// Clouds deliver "shut down now" as a power-button press, an ACPI G2
// soft-off: Google Compute Engine when it preempts a spot VM (about 30 s
// before it powers the VM off), AWS Nitro instances when they are stopped or
// terminated. A press gives a [termsig.Terminate] notice whose Event is
// [EventPowerButton] ("power-button"), whose Deadline is zero (unknown) and
// whose Reason names the device and the transport, such as "power button
// LNXPWRBN:00 (netlink)".
//
// # Systems
//
// The source works on Linux only: the three transports below are Linux
// interfaces. On other systems Watch and [Source.Available] return an
// error wrapping [termsig.ErrUnavailable] at once (unless the Config
// itself is invalid, see below).
//
// # Transports
//
// The press reaches user space in three ways, and [Source.Watch] uses every
// one that the host has ([Config.Transports] narrows the choice;
// [Source.Available] tells whether there is any, and Watch logs which it
// uses). acpid's socket and the input devices are looked for below
// [Config.Root], which a program in a container that sees the host's root
// filesystem under another directory, such as /host, sets to it:
//
//   - [Netlink]: the kernel's generic netlink family "acpi_event", multicast
//     group "acpi_mc_group", both resolved by name. It carries a struct
//     acpi_genl_event; a press is device class "button/power" with type
//     0x80. The family exists only in the host's initial network namespace,
//     so a container with a network namespace of its own does not see it.
//   - [Acpid]: acpid's UNIX socket ([Config.AcpidSocket], by default
//     /var/run/acpid.socket), one line per event ("button/power PBTN
//     00000080 00000000"; tokens after the fourth are ignored). The socket
//     must exist when Watch starts for acpid to be used.
//   - [Input]: the input devices (/dev/input/event*) whose key capabilities
//     in sysfs (/sys/class/input/eventN/device/capabilities/key) include
//     KEY_POWER; a press is an EV_KEY/KEY_POWER event with value 1 (not
//     the release, 0, nor an autorepeat, 2). Reading them usually needs
//     root or the "input" group. A keyboard that has a power key is read
//     too; its other keys are neither kept nor logged.
//
// Watch returns an error wrapping [termsig.ErrUnavailable] when none is
// there, and always on systems other than Linux.
//
// # First look
//
// Before it waits for presses, Watch subscribes to netlink, opens the
// input devices and makes a first attempt to connect to acpid (bounded to
// 1 s; it succeeds or fails at once unless acpid is stuck). Then it calls
// [termsig.Run.Ready], whether acpid answered or not: a failure is
// reported with [termsig.Run.Report] before that, and retried after. All
// of it is quick and local, so [Source.Traits] says LocalFirstLook and
// termsig.New waits for it: a press after New has returned is not missed.
//
// # Failures
//
// Nothing a transport does wrong causes a notice by itself:
//
//   - When acpid goes away (it exits, closes the connection, or refuses
//     while it restarts), or the netlink subscription fails, Watch
//     reconnects with backoff (100 ms, doubling up to 5 s, reset once a
//     connection has carried an event) and reports the failure with
//     [termsig.Run.Report] meanwhile; the Notifier logs each change, so
//     an outage is one line however many attempts fail. The transport
//     that has failed longest is the one reported. Each connection made
//     counts as hearing from the origin ([termsig.Run.Heard]).
//   - A netlink receive buffer overrun (ENOBUFS) loses the events that did
//     not fit, which the other transports may still have: it is logged as
//     a warning, and the subscription goes on.
//   - An input device that goes away (unplugged, a recording read to its
//     end) is logged as a warning and not reopened; the other transports
//     go on. Watch returns an error, and the Notifier shows the source as
//     failed, only when every transport it used has ended this way.
//   - A payload that cannot be read (a malformed acpid line, one longer
//     than 512 bytes, a short netlink event) is logged at debug level and
//     dropped: never a notice, never a panic. An input_event record that
//     arrives in parts is read once it is whole.
//   - When the Watch context is done, the reads in progress are unblocked
//     and Watch returns within milliseconds, leaving no goroutine, socket
//     or file behind.
//
// # Configuration errors
//
// A [Config] that cannot work makes Watch return at once with an error
// that starts "acpi: " and names the field, and a [termsig.Notifier] shows
// the source as failed: Transports with unknown bits and, on Linux, an
// AcpidSocket or InputDevices that the Config sets for a selected
// transport and that is not there (see [Config]). Places the Config leaves
// empty are defaults: a transport whose default place is missing is simply
// not used. [Source.Available] returns the same error, not
// [termsig.ErrUnavailable], so that a program that picks its sources with
// Available (as sources.Detect does) keeps a misconfigured source and sees
// it fail rather than lose it quietly.
//
// # One press, one notice
//
// One press reaches several transports, and acpid reports it twice
// ("button/power PBTN ..." from the input layer, "button/power LNXPWRBN:00
// ..." from the kernel). Reports that arrive within 2 s of the press that
// gave the last notice are taken for that press and dropped, with a debug
// log. The window is fixed from that press, not sliding: a press after it
// is a new notice, which a program may take as "hurry".
//
// # Other ACPI events
//
// The lid, the sleep button, the AC adapter, the battery and thermal zones
// also send ACPI events. None of them means that the machine is going away
// (closing a laptop's lid suspends it at most), so they are not notices:
// they are logged at debug level and dropped. So is anything malformed: a
// payload that cannot be read is never a notice and never a panic.
//
// # Performance
//
// From a press to its notice on [termsig.Notifier.C], over 1000 presses
// each (2 cores, AMD EPYC, Go 1.26, linux/amd64; see the repository's
// README; go test -run XXX -bench Latency -benchtime 1x ./acpi):
//
//   - a line from the fake acpid: 5.3 µs (p50), 18–70 µs (p99);
//   - an input_event written to a fake device (a FIFO): 3.8 µs (p50),
//     19–70 µs (p99);
//   - an acpi_event netlink message through the kernel (as root):
//     8.5–13 µs (p50), 42–114 µs (p99).
//
// # Testing
//
// Package [github.com/termsig/termsig/acpi/acpitest] has a fake acpid on a
// real UNIX socket, fake input devices (FIFOs with their sysfs entries) and
// builders for netlink and input_event bytes, for the tests of programs
// that use this package.
package acpi
