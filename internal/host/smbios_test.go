package host

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
)

// structure builds an SMBIOS structure: the 4-byte header (handle 0),
// fields, then the string set.
func structure(typ byte, fields []byte, strs ...string) []byte {
	b := []byte{typ, byte(4 + len(fields)), 0, 0}
	b = append(b, fields...)
	for _, s := range strs {
		b = append(b, s...)
		b = append(b, 0)
	}
	if len(strs) == 0 {
		b = append(b, 0)
	}
	return append(b, 0)
}

// rawSMBIOS builds the buffer GetSystemFirmwareTable('RSMB') fills: the
// RawSMBIOSData header (SMBIOS 2.3, as on Azure's generation 1 VMs) and
// the structures.
func rawSMBIOS(structs ...[]byte) []byte {
	table := bytes.Join(structs, nil)
	b := []byte{0, 2, 3, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(table)))
	return append(b, table...)
}

// chassis is a type 3 structure of SMBIOS 2.3 (21 bytes), whose asset tag
// is string number tag.
func chassis(tag byte, strs ...string) []byte {
	fields := make([]byte, 17)
	fields[0], fields[1], fields[2], fields[3], fields[4] = 1, 3, 2, 3, tag
	return structure(3, fields, strs...)
}

// As on an Azure VM (strings as dmidecode shows them there).
var (
	biosInfo   = structure(0, make([]byte, 14), "Microsoft Corporation", "Hyper-V UEFI Release v4.1", "04/06/2022")
	systemInfo = structure(1, append([]byte{1, 2, 3, 4}, make([]byte, 19)...), "Microsoft Corporation", "Virtual Machine", "7.0", "0000-0014-9032-5226-0519-1497-28")
	azureRaw   = rawSMBIOS(biosInfo, systemInfo,
		chassis(4, "Microsoft Corporation", "7.0", "0000-0014-9032-5226-0519-1497-28", azureAssetTag),
		structure(127, nil))
)

func TestChassisAssetTag(t *testing.T) {
	hyperv := rawSMBIOS(biosInfo, systemInfo, chassis(4, "Microsoft Corporation", "7.0", "1234", "4816-0264-7380-6372-9310-6459-43"), structure(127, nil))
	short := rawSMBIOS(structure(3, []byte{1, 3, 0, 0}, "Acme"))
	long := append(rawSMBIOS(biosInfo), chassis(1, "outside the table")...)
	unended := rawSMBIOS(chassis(1, azureAssetTag))
	unended = unended[:len(unended)-2]
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{name: "azure", raw: azureRaw, want: azureAssetTag},
		{name: "hyper-v", raw: hyperv, want: "4816-0264-7380-6372-9310-6459-43"},
		{name: "no asset tag", raw: rawSMBIOS(chassis(0, "Acme"))},
		{name: "no strings", raw: rawSMBIOS(chassis(1))},
		{name: "string number too big", raw: rawSMBIOS(chassis(3, "Acme", "1.0"))},
		{name: "spaces trimmed", raw: rawSMBIOS(chassis(1, " Tag 7  ")), want: "Tag 7"},
		{name: "first chassis", raw: rawSMBIOS(chassis(1, "first"), chassis(1, "second")), want: "first"},
		{name: "chassis too short for the tag", raw: short},
		{name: "after end of table", raw: rawSMBIOS(biosInfo, structure(127, nil), chassis(1, azureAssetTag))},
		{name: "beyond the table's length", raw: long},
		{name: "table shorter than its length", raw: azureRaw[:len(azureRaw)-30]},
		{name: "structure length below 4", raw: rawSMBIOS([]byte{3, 2, 0, 0, 0, 0})},
		{name: "structure longer than the table", raw: rawSMBIOS([]byte{3, 40, 0, 0, 1, 0, 0})},
		{name: "no end of strings", raw: unended},
		{name: "header only", raw: rawSMBIOS()},
		{name: "short header", raw: []byte{0, 2, 3}},
		{name: "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, chassisAssetTag(tc.raw))
		})
	}
}

// A table from outside is never a panic, and a tag found is one of its
// strings.
func FuzzChassisAssetTag(f *testing.F) {
	f.Add(azureRaw)
	f.Add(rawSMBIOS(biosInfo, systemInfo, chassis(4, "Microsoft Corporation", "7.0", "1234", "None"), structure(127, nil)))
	f.Add(rawSMBIOS(chassis(0)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		tag := chassisAssetTag(raw)
		if tag == "" {
			return
		}
		if !bytes.Contains(raw, []byte(tag)) || bytes.IndexByte([]byte(tag), 0) >= 0 {
			t.Fatalf("tag %q is not a string of the table", tag)
		}
	})
}
