// Package host recognises the cloud a host runs on from local facts only:
// DMI files under /sys and environment variables. It never touches the
// network, so it is fast on every host.
package host

import (
	"os"
	"path/filepath"
	"strings"
)

// Azure's chassis asset tag, from /sys/class/dmi/id/chassis_asset_tag.
const azureAssetTag = "7783-7084-3265-9085-8269-3286-77"

// Info is what the local facts say about the host.
type Info struct {
	EC2   bool // DMI says Amazon EC2 (Nitro) or a Xen UUID starting with "ec2"
	GCE   bool // DMI says Google Compute Engine
	Azure bool // DMI has Azure's chassis asset tag

	IMDSEndpoint string // AWS_EC2_METADATA_SERVICE_ENDPOINT, if set
	IMDSDisabled bool   // AWS_EC2_METADATA_DISABLED is "true", any case
	GCEHost      string // GCE_METADATA_HOST, if set
}

// Detect reads the facts below root ("/" on a real host; a test directory
// in tests) and from getenv (os.Getenv when nil). Missing or unreadable
// files mean "no".
func Detect(root string, getenv func(string) string) Info {
	if getenv == nil {
		getenv = os.Getenv
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	dmi := func(name string) string { return read("sys/class/dmi/id/" + name) }

	var in Info
	for _, v := range []string{dmi("sys_vendor"), dmi("board_vendor")} {
		if v == "Amazon EC2" {
			in.EC2 = true
		}
	}
	for _, u := range []string{dmi("product_uuid"), read("sys/hypervisor/uuid")} {
		if len(u) >= 3 && strings.EqualFold(u[:3], "ec2") {
			in.EC2 = true
		}
	}
	switch dmi("product_name") {
	case "Google Compute Engine", "Google":
		in.GCE = true
	}
	in.Azure = dmi("chassis_asset_tag") == azureAssetTag

	in.IMDSEndpoint = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	in.IMDSDisabled = strings.EqualFold(getenv("AWS_EC2_METADATA_DISABLED"), "true")
	in.GCEHost = getenv("GCE_METADATA_HOST")
	return in
}
