// Package acpitest provides fakes for testing code that uses package acpi,
// as net/http/httptest does for net/http.
//
// # acpid
//
// [NewAcpid] starts a fake acpid on a real UNIX socket in a temporary
// directory. Point acpi.Config.AcpidSocket at [Acpid.Path], wait for the
// source to connect with [Acpid.WaitClients], then write lines with
// [Acpid.Send] or press the power button with [Acpid.PressPowerButton],
// which writes the two lines acpid writes for one press. [Acpid.Stop] and
// [Acpid.Start] act as acpid exiting and being restarted.
//
// # Input devices
//
// [NewInput] (Linux) creates a fake /dev/input and sysfs tree in a
// directory laid out like "/"; point acpi.Config.Root at [Input.Root]. A
// device made by [Input.AddDevice] is a FIFO: what is written to it with
// [InputDevice.Write] or [InputDevice.PressPowerButton] is read by the
// source as from a real device. [Input.AddRecording] makes a device from a
// regular file of recorded events.
//
// # Bytes
//
// [GenlEvent], [GenlMessage] and [NetlinkMessage] build the kernel's
// acpi_event netlink payloads; [InputEvent] and [PowerPress] build struct
// input_event records; [KeyBitmap] builds a sysfs key capability bitmap.
// All use the host's byte order and word size, as the kernel does.
package acpitest
