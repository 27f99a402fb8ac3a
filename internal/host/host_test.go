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
