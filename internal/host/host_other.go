//go:build !windows

package host

// readBIOS reads the firmware's strings from the DMI files below root. On
// systems without them (macOS) every field is empty, so nothing is
// recognised.
func readBIOS(root string) BIOS { return readDMI(root) }
