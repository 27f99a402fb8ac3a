// Package sources picks the termsig sources that apply on the current host
// ([Detect]) or the ones a user names ([ByName]).
//
// # Detection
//
// Detection reads local facts only, so it takes well under a millisecond
// and never waits on the network: a program that starts on a laptop does
// not stall probing 169.254.169.254. What it reads depends on the system:
//
//   - Linux: the DMI files under /sys/class/dmi/id and /sys/hypervisor/uuid
//     say whether the host is an EC2 or GCE instance; the presence of
//     acpid's socket, of the kernel's acpi_event family or of a
//     power-button input device selects the acpi source.
//   - Windows: the BIOS values of the registry key
//     HKEY_LOCAL_MACHINE\HARDWARE\DESCRIPTION\System\BIOS say whether
//     the host is an EC2 or GCE instance. The acpi source is Linux-only.
//   - macOS: no firmware facts are read, so imds and gcemeta are selected
//     only by their environment variables or configuration. The acpi
//     source is Linux-only.
//
// On every system the signal source is always selected, and the
// environment variables of the clouds' SDKs are honoured:
// AWS_EC2_METADATA_SERVICE_ENDPOINT and AWS_EC2_METADATA_DISABLED for
// imds, GCE_METADATA_HOST for gcemeta.
package sources
