package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   map[string]string
		want  Info
	}{
		{name: "bare metal", files: map[string]string{"sys/class/dmi/id/sys_vendor": "Dell Inc.\n"}},
		{name: "no sysfs"},
		{name: "nitro", files: map[string]string{"sys/class/dmi/id/sys_vendor": "Amazon EC2\n"}, want: Info{EC2: true}},
		{name: "nitro board", files: map[string]string{"sys/class/dmi/id/board_vendor": "Amazon EC2\n"}, want: Info{EC2: true}},
		{name: "xen uuid", files: map[string]string{"sys/hypervisor/uuid": "ec2e1916-9099-7caf-fd21-012345abcdef\n"}, want: Info{EC2: true}},
		{name: "xen uuid upper", files: map[string]string{"sys/class/dmi/id/product_uuid": "EC2E1916-9099-7CAF-FD21-012345ABCDEF\n"}, want: Info{EC2: true}},
		{name: "not ec2 uuid", files: map[string]string{"sys/class/dmi/id/product_uuid": "4c4c4544-0042-3510\n"}},
		{name: "gce", files: map[string]string{"sys/class/dmi/id/product_name": "Google Compute Engine\n"}, want: Info{GCE: true}},
		{name: "gce short", files: map[string]string{"sys/class/dmi/id/product_name": "Google\n"}, want: Info{GCE: true}},
		{name: "azure", files: map[string]string{"sys/class/dmi/id/chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77\n"}, want: Info{Azure: true}},
		{name: "alibaba", files: map[string]string{"sys/class/dmi/id/product_name": "Alibaba Cloud ECS\n"}, want: Info{Alibaba: true}},
		{name: "tencent", files: map[string]string{"sys/class/dmi/id/product_name": "Tencent Cloud CVM\n"}, want: Info{Tencent: true}},
		{
			name: "env",
			env: map[string]string{
				"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1338",
				"AWS_EC2_METADATA_DISABLED":         "TRUE",
				"GCE_METADATA_HOST":                 "127.0.0.1:8080",
			},
			want: Info{IMDSEndpoint: "http://127.0.0.1:1338", IMDSDisabled: true, GCEHost: "127.0.0.1:8080"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, v := range tc.files {
				full := filepath.Join(root, p)
				require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
				require.NoError(t, os.WriteFile(full, []byte(v), 0o644))
			}
			got := Detect(root, func(k string) string { return tc.env[k] })
			assert.Equal(t, tc.want, got)
		})
	}
}

// Firmware strings as Linux and Windows show them on each kind of machine.
func TestClassify(t *testing.T) {
	type want struct{ ec2, gce, azure, alibaba, tencent bool }
	for _, tc := range []struct {
		name string
		bios BIOS
		want want
	}{
		{name: "empty"},
		{
			name: "ec2 nitro, windows",
			bios: BIOS{SystemVendor: "Amazon EC2", BoardVendor: "Amazon EC2", ProductName: "m5.large", BIOSVendor: "Amazon EC2", BIOSVersion: "1.0"},
			want: want{ec2: true},
		},
		{name: "ec2 nitro, bios vendor only", bios: BIOS{BIOSVendor: "amazon ec2"}, want: want{ec2: true}},
		{name: "ec2 nitro, linux", bios: BIOS{SystemVendor: "Amazon EC2", ProductName: "m6i.large"}, want: want{ec2: true}},
		{
			name: "ec2 xen, windows",
			bios: BIOS{SystemVendor: "Xen", ProductName: "HVM domU", BIOSVendor: "Xen", BIOSVersion: "4.11.amazon"},
			want: want{ec2: true},
		},
		{name: "ec2 xen, upper case", bios: BIOS{SystemVendor: "Xen", BIOSVersion: "4.2.AMAZON"}, want: want{ec2: true}},
		{name: "ec2 xen, linux", bios: BIOS{SystemVendor: "Xen", ProductName: "HVM domU", HypervisorUUID: "ec2e1916-9099-7caf-fd21-012345abcdef"}, want: want{ec2: true}},
		{name: "plain xen", bios: BIOS{SystemVendor: "Xen", ProductName: "HVM domU", BIOSVendor: "Xen", BIOSVersion: "4.16.2"}},
		{name: "amazon not at the end of the version", bios: BIOS{SystemVendor: "Xen", BIOSVersion: "4.11.amazon-custom"}},
		{name: "gce, windows", bios: BIOS{SystemVendor: "Google", BoardVendor: "Google", ProductName: "Google Compute Engine", BIOSVendor: "Google", BIOSVersion: "Google"}, want: want{gce: true}},
		{name: "gce short", bios: BIOS{ProductName: "Google"}, want: want{gce: true}},
		{
			name: "azure",
			bios: BIOS{SystemVendor: "Microsoft Corporation", BoardVendor: "Microsoft Corporation", ProductName: "Virtual Machine", BIOSVendor: "Microsoft Corporation", BIOSVersion: "Hyper-V UEFI Release v4.1", AssetTag: azureAssetTag},
			want: want{azure: true},
		},
		{
			name: "plain hyper-v",
			bios: BIOS{SystemVendor: "Microsoft Corporation", BoardVendor: "Microsoft Corporation", ProductName: "Virtual Machine", BIOSVendor: "Microsoft Corporation", BIOSVersion: "Hyper-V UEFI Release v4.1", AssetTag: "4816-0264-7380-6372-9310-6459-43"},
		},
		{name: "hyper-v, no asset tag", bios: BIOS{SystemVendor: "Microsoft Corporation", ProductName: "Virtual Machine"}},
		{name: "vmware", bios: BIOS{SystemVendor: "VMware, Inc.", BoardVendor: "Intel Corporation", ProductName: "VMware Virtual Platform", BIOSVendor: "Phoenix Technologies LTD", BIOSVersion: "6.00", AssetTag: "No Asset Tag"}},
		{name: "virtualbox", bios: BIOS{SystemVendor: "innotek GmbH", BoardVendor: "Oracle Corporation", ProductName: "VirtualBox", BIOSVendor: "innotek GmbH", BIOSVersion: "VirtualBox"}},
		{name: "alibaba", bios: BIOS{SystemVendor: "Alibaba Cloud", ProductName: "Alibaba Cloud ECS"}, want: want{alibaba: true}},
		{name: "tencent", bios: BIOS{SystemVendor: "Tencent Cloud", ProductName: "Tencent Cloud CVM"}, want: want{tencent: true}},
		// The vendor alone is not enough: cloud-init goes by the product
		// name only, and so does a machine built elsewhere on their KVM.
		{name: "alibaba vendor, other product", bios: BIOS{SystemVendor: "Alibaba Cloud", ProductName: "KVM"}},
		{name: "tencent product in another case", bios: BIOS{ProductName: "tencent cloud cvm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := classify(tc.bios)
			got := want{in.EC2, in.GCE, in.Azure, in.Alibaba, in.Tencent}
			assert.Equal(t, tc.want, got)
		})
	}
}
