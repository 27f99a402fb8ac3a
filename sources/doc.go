// Package sources picks the termsig sources that apply on the current host
// ([Detect]) or the ones a user names ([ByName]), and provides a fake source
// for unit tests ([Fake]).
//
// Detection reads local facts only (DMI files under /sys, environment
// variables such as AWS_EC2_METADATA_SERVICE_ENDPOINT and GCE_METADATA_HOST,
// the presence of acpid's socket or of the kernel's acpi_event family), so
// it takes well under a millisecond and never waits on the network: a
// program that starts on a laptop does not stall probing 169.254.169.254.
package sources
