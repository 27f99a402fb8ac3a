// Package sources picks the termsig sources that apply on the current host
// ([Detect]) or the ones a user names ([ByName]).
//
// # Detection
//
// Detection reads local facts only (each platform source's Available, see
// [termsig.Detector]), so it takes well under a millisecond
// and never waits on the network: a program that starts on a laptop does
// not stall probing 169.254.169.254. What it reads depends on the system:
//
//   - Linux: the DMI files under /sys/class/dmi/id and /sys/hypervisor/uuid
//     say whether the host is an EC2, GCE, Azure, Alibaba Cloud ECS or
//     Tencent Cloud CVM instance; the presence of acpid's socket, of the
//     kernel's acpi_event family or of a power-button input device selects
//     the acpi source, and the system bus's socket the logind source.
//   - Windows: the BIOS values of the registry key
//     HKEY_LOCAL_MACHINE\HARDWARE\DESCRIPTION\System\BIOS, and the
//     SMBIOS tables for Azure's asset tag, say the same. The acpi and
//     logind sources are Linux-only.
//   - macOS: no firmware facts are read, so the cloud sources are selected
//     only by their environment variables or configuration. The acpi and
//     logind sources are Linux-only.
//
// On every system the signal source is selected unless
// [Config.PlatformOnly] is set (a program that watches the host for
// others, or adds a signal source of its own: a [termsig.Notifier] refuses
// two sources of one name), and the environment variables of the clouds' SDKs are honoured:
// AWS_EC2_METADATA_SERVICE_ENDPOINT and AWS_EC2_METADATA_DISABLED for
// imds, GCE_METADATA_HOST for gcemeta, DBUS_SYSTEM_BUS_ADDRESS for
// logind; and termsig's own AZURE_METADATA_ENDPOINT for azure,
// ALIBABA_METADATA_ENDPOINT for alibaba and TENCENT_METADATA_ENDPOINT for
// tencent.
package sources
