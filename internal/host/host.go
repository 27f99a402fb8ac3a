// Package host recognises the cloud a host runs on from local facts only,
// so it is fast on every host and never touches the network:
//
//   - Linux (and any system but Windows): the DMI files under
//     /sys/class/dmi/id and /sys/hypervisor/uuid;
//   - Windows: the BIOS values in the registry key
//     HKEY_LOCAL_MACHINE\HARDWARE\DESCRIPTION\System\BIOS, and the chassis
//     asset tag from the SMBIOS table (GetSystemFirmwareTable), which the
//     registry does not hold;
//   - macOS has neither, so nothing is recognised there;
//   - everywhere: the environment variables of the clouds' SDKs.
//
// The firmware facts are gathered into a [BIOS] on each system, and one
// function, classify, decides what they say.
package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Azure's chassis asset tag: SMBIOS type 3, "Asset Tag Number". Linux
// shows it in /sys/class/dmi/id/chassis_asset_tag; cloud-init recognises
// Azure by it (canonical/cloud-init cloudinit/sources/azure/identity.py,
// ChassisAssetTag), and Microsoft's MSLab scripts on Windows by WMI's
// Win32_SystemEnclosure.SMBIOSAssetTag, the same SMBIOS field
// (microsoft/MSLab Scripts/0_Shared.ps1, "host.isAzure").
// Plain Hyper-V has the same manufacturer and product ("Microsoft
// Corporation", "Virtual Machine") but not this tag.
const azureAssetTag = "7783-7084-3265-9085-8269-3286-77"

// The product names (SMBIOS type 1, "Product Name") of Alibaba Cloud's ECS
// instances and Tencent Cloud's CVM instances, as cloud-init recognises
// them (canonical/cloud-init cloudinit/sources/DataSourceAliYun.py,
// ALIYUN_PRODUCT, and tools/ds-identify, dscheck_AliYun;
// cloudinit/sources/DataSourceTencentCloud.py, TENCENTCLOUD_PRODUCT).
const (
	alibabaProduct = "Alibaba Cloud ECS"
	tencentProduct = "Tencent Cloud CVM"
)

// Info is what the local facts say about the host.
type Info struct {
	EC2     bool // the firmware says Amazon EC2 (Nitro), or Xen built by Amazon
	GCE     bool // the firmware says Google Compute Engine
	Azure   bool // the firmware has Azure's chassis asset tag
	Alibaba bool // the firmware says Alibaba Cloud ECS
	Tencent bool // the firmware says Tencent Cloud CVM

	IMDSEndpoint string // AWS_EC2_METADATA_SERVICE_ENDPOINT, if set
	IMDSDisabled bool   // AWS_EC2_METADATA_DISABLED is "true", any case
	GCEHost      string // GCE_METADATA_HOST, if set
}

// BIOS holds the firmware's (SMBIOS) strings that tell clouds apart, as
// each system shows them. An empty field is one the system does not show,
// or does not have: Linux's reader leaves BIOSVendor and BIOSVersion empty
// (its UUIDs already tell Xen EC2 apart), Windows' leaves the UUIDs empty
// (the registry has none).
type BIOS struct {
	SystemVendor   string // type 1 manufacturer: sys_vendor; SystemManufacturer
	BoardVendor    string // type 2 manufacturer: board_vendor; BaseBoardManufacturer
	ProductName    string // type 1 product name: product_name; SystemProductName
	BIOSVendor     string // type 0 vendor: BIOSVendor (Windows)
	BIOSVersion    string // type 0 version: BIOSVersion (Windows)
	AssetTag       string // type 3 asset tag: chassis_asset_tag; the SMBIOS table (Windows)
	ProductUUID    string // type 1 UUID: product_uuid (Linux)
	HypervisorUUID string // Xen's domain UUID: /sys/hypervisor/uuid (Linux)

	registry bool // read from Windows' registry and SMBIOS table, not DMI files
}

// ReadBIOS returns the firmware's strings below root, as [Detect] reads
// them, for a message that says what was read.
func ReadBIOS(root string) BIOS { return readBIOS(root) }

// Quote returns the strings of b named by their DMI file names
// (sys_vendor, board_vendor, product_name, chassis_asset_tag; bios_vendor
// and bios_version, which only Windows' reader has, are left out
// elsewhere), as read, for a one-line message: `DMI sys_vendor "QEMU",
// board_vendor "QEMU"`, or with the registry's names on Windows
// (`SystemManufacturer "QEMU"`). A b with no string at all gives "no DMI
// strings" (macOS, a container without /sys).
func (b BIOS) Quote(names ...string) string {
	if b == (BIOS{registry: b.registry}) {
		if b.registry {
			return "no BIOS strings in the registry"
		}
		return "no DMI strings"
	}
	var parts []string
	for _, name := range names {
		var v, win string
		switch name {
		case "sys_vendor":
			v, win = b.SystemVendor, "SystemManufacturer"
		case "board_vendor":
			v, win = b.BoardVendor, "BaseBoardManufacturer"
		case "product_name":
			v, win = b.ProductName, "SystemProductName"
		case "chassis_asset_tag":
			v, win = b.AssetTag, "SMBIOS asset tag"
		case "bios_vendor", "bios_version":
			if !b.registry {
				continue
			}
			v, win = b.BIOSVendor, "BIOSVendor"
			if name == "bios_version" {
				v, win = b.BIOSVersion, "BIOSVersion"
			}
		default:
			panic("termsig: host.BIOS.Quote of an unknown string: " + name)
		}
		if b.registry {
			name = win
		}
		parts = append(parts, fmt.Sprintf("%s %q", name, v))
	}
	if b.registry {
		return strings.Join(parts, ", ")
	}
	return "DMI " + strings.Join(parts, ", ")
}

// Detect reads the facts of the host below root and from getenv
// (os.Getenv when nil). Root "/" is this machine; any other directory is a
// test's fake host laid out like Linux's /sys, read the same way on every
// system. Missing or unreadable facts mean "no".
func Detect(root string, getenv func(string) string) Info {
	if getenv == nil {
		getenv = os.Getenv
	}
	in := classify(readBIOS(root))
	in.IMDSEndpoint = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	in.IMDSDisabled = strings.EqualFold(getenv("AWS_EC2_METADATA_DISABLED"), "true")
	in.GCEHost = getenv("GCE_METADATA_HOST")
	return in
}

// classify says which cloud the firmware's strings name, if any, in the
// cloud fields of an Info. The same rules serve Linux's DMI files and
// Windows' registry, since both show the same SMBIOS strings.
func classify(b BIOS) Info {
	// Nitro puts "Amazon EC2" in the system and board manufacturer (Linux:
	// sys_vendor, board_vendor) and in the BIOS vendor, which the SSM agent
	// compares with Win32_BIOS.Manufacturer on Windows, any case
	// (aws/amazon-ssm-agent common/identity/availableidentities/ec2/
	// ec2detector/nitrodetector/nitrodetector.go and
	// nitrodetector_windows.go).
	nitro := b.SystemVendor == "Amazon EC2" || b.BoardVendor == "Amazon EC2" ||
		strings.EqualFold(b.BIOSVendor, "Amazon EC2")
	// Amazon's Xen has a BIOS version ending in ".amazon", such as
	// "4.11.amazon", which the same agent reads from
	// Win32_BIOS.SMBIOSBIOSVersion on Windows (xendetector/xendetector.go
	// and xendetector_windows.go); its UUIDs start with "ec2", any case.
	xen := strings.HasSuffix(strings.ToLower(b.BIOSVersion), ".amazon") ||
		ec2UUID(b.ProductUUID) || ec2UUID(b.HypervisorUUID)
	// Google's own client reads the same product name: exactly these two
	// on Linux, SystemProductName in the registry on Windows
	// (googleapis/google-cloud-go compute/metadata/syscheck_linux.go and
	// syscheck_windows.go).
	gce := b.ProductName == "Google Compute Engine" || b.ProductName == "Google"
	return Info{
		EC2:     nitro || xen,
		GCE:     gce,
		Azure:   b.AssetTag == azureAssetTag,
		Alibaba: b.ProductName == alibabaProduct,
		Tencent: b.ProductName == tencentProduct,
	}
}

func ec2UUID(u string) bool { return len(u) >= 3 && strings.EqualFold(u[:3], "ec2") }

// readDMI reads the firmware's strings from the DMI files below root.
func readDMI(root string) BIOS {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	dmi := func(name string) string { return read("sys/class/dmi/id/" + name) }
	return BIOS{
		SystemVendor:   dmi("sys_vendor"),
		BoardVendor:    dmi("board_vendor"),
		ProductName:    dmi("product_name"),
		AssetTag:       dmi("chassis_asset_tag"),
		ProductUUID:    dmi("product_uuid"),
		HypervisorUUID: read("sys/hypervisor/uuid"),
	}
}
