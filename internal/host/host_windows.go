package host

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// biosKey holds the SMBIOS strings Windows reads at boot, the values
// fastfetch reads too (fastfetch-cli/fastfetch
// src/detection/host/host_windows.c, src/detection/bios/bios_windows.c).
const biosKey = `HARDWARE\DESCRIPTION\System\BIOS`

// rsmb is the raw SMBIOS provider's signature for GetSystemFirmwareTable,
// the multi-character constant 'RSMB'.
const rsmb = 'R'<<24 | 'S'<<16 | 'M'<<8 | 'B'

// maxSMBIOS bounds the buffer for the SMBIOS table, which is a few
// kilobytes on real machines.
const maxSMBIOS = 1 << 20

// readBIOS reads this machine's firmware strings from the registry and the
// SMBIOS table when root is "/" (or empty), and a test's fake host from
// the DMI files below root otherwise. A missing key, value or table leaves
// its fields empty.
func readBIOS(root string) BIOS {
	if root != "/" && root != "" {
		return readDMI(root)
	}
	b := registryBIOS()
	b.AssetTag = chassisAssetTag(smbiosTable())
	b.registry = true
	return b
}

// registryBIOS reads the BIOS values of the registry.
func registryBIOS() BIOS {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, biosKey, registry.QUERY_VALUE)
	if err != nil {
		return BIOS{}
	}
	defer k.Close()
	get := func(name string) string {
		s, _, err := k.GetStringValue(name)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(s)
	}
	return BIOS{
		SystemVendor: get("SystemManufacturer"),
		BoardVendor:  get("BaseBoardManufacturer"),
		ProductName:  get("SystemProductName"),
		BIOSVendor:   get("BIOSVendor"),
		BIOSVersion:  get("BIOSVersion"),
	}
}

// smbiosTable returns the raw SMBIOS table, as chassisAssetTag reads it,
// or nil when Windows does not provide it.
func smbiosTable() []byte {
	proc := windows.NewLazySystemDLL("kernel32.dll").NewProc("GetSystemFirmwareTable")
	if proc.Find() != nil {
		return nil
	}
	size, _, _ := proc.Call(rsmb, 0, 0, 0)
	// The table is fixed at boot, but a second try costs nothing if the
	// required size changed between the two calls.
	for range 2 {
		if size == 0 || size > maxSMBIOS {
			return nil
		}
		buf := make([]byte, size)
		n, _, _ := proc.Call(rsmb, 0, uintptr(unsafe.Pointer(&buf[0])), size)
		if n <= size {
			return buf[:n]
		}
		size = n // too small: n is the size it needs
	}
	return nil
}
