// Package acpi reports presses of the ACPI power button as termsig
// notices.
//
// Clouds deliver "shut down now" as a power-button press (an ACPI G2
// soft-off): Google Compute Engine when it preempts a spot VM, about 30 s
// before it powers it off, and AWS Nitro instances when they are stopped or
// terminated. A press gives a [termsig.Terminate] notice whose Event is
// [EventPowerButton], whose Deadline is zero (unknown) and whose Reason
// names the device and the transport, such as "power button LNXPWRBN:00
// (netlink)". Other ACPI events (lid, sleep button, AC adapter, battery,
// thermal) do not mean that the machine is going away: they are logged at
// debug level and dropped.
//
// # Transports
//
// The source works on Linux only. [Source.Watch] uses every transport that
// the host has; [Config.Transports] narrows the choice, and acpid's socket
// and the input devices are looked for below [Config.Root] (set it to, say,
// /host in a container that sees the host's root there):
//
//   - [Netlink]: the kernel's generic netlink family "acpi_event", seen only
//     in the host's initial network namespace.
//   - [Acpid]: acpid's socket, [Config.AcpidSocket].
//   - [Input]: the input devices of [Config.InputDevices] that have
//     KEY_POWER; reading them usually needs root or the "input" group.
//
// When none is there, and always on other systems, Watch and
// [Source.Available] return an error wrapping [termsig.ErrUnavailable]. A
// [Config] that cannot work (unknown Transports bits; a place it sets that
// is not there) is instead an error that starts "acpi: " and names the
// field, from both: the source shows as failed, not as missing.
//
// # Guarantees
//
//   - First look: Watch subscribes to netlink, opens the input devices and
//     tries acpid once (at most 1 s) before [termsig.Run.Ready], and
//     termsig.New waits for that: a press after New has returned is not
//     missed (see [Source.Traits]).
//   - One press, one notice: one press reaches several transports, and
//     acpid reports it twice. Reports within 2 s of the press that gave the
//     last notice are that press, dropped with a debug log. The window is
//     fixed, not sliding: a press after it is a new notice, which a program
//     may take as "hurry".
//   - When the Watch context is done, Watch returns within milliseconds,
//     leaving no goroutine, socket or file behind.
//
// # Failures
//
// Nothing a transport does wrong causes a notice by itself:
//
//   - When acpid goes away (it exits, closes the connection, or refuses while
//     it restarts) or the netlink subscription fails, Watch reconnects with
//     backoff (at most 5 s apart) and reports the failure of the transport
//     that has failed longest with [termsig.Run.Report]; the Notifier logs
//     each change once. Each connection counts as [termsig.Run.Heard].
//   - A netlink receive buffer overrun (ENOBUFS) loses the events that did
//     not fit, which other transports may still have: a warning, and the
//     subscription goes on.
//   - An input device that goes away is a warning and is not reopened; Watch
//     returns an error only when every transport it used has ended so.
//   - A payload that cannot be read (a malformed acpid line, one longer than
//     512 bytes, a short netlink event) is dropped with a debug log: never a
//     notice, never a panic. An input_event that arrives in parts is read
//     once it is whole.
//
// # Testing
//
// Package [github.com/termsig/termsig/acpi/acpitest] has a fake acpid on a
// real UNIX socket, fake input devices (FIFOs with their sysfs entries) and
// builders for netlink and input_event bytes, for the tests of programs
// that use this package.
package acpi
