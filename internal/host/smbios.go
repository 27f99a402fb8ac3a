package host

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// SMBIOS structure types (DMTF DSP0134).
const (
	smbiosChassis    = 3
	smbiosEndOfTable = 127
)

// chassisAssetTag returns the asset tag of the first chassis (SMBIOS
// structure type 3) in raw, the buffer that Windows'
// GetSystemFirmwareTable('RSMB', 0) fills, or "" when raw holds none or
// is malformed. It is only used on Windows, which has no file like
// Linux's chassis_asset_tag and no registry value for it, but it is plain
// Go so that it is tested and fuzzed everywhere.
//
// The layout is the one fastfetch reads (fastfetch-cli/fastfetch
// src/util/smbiosHelper.c, src/detection/chassis/chassis_windows.c):
// an 8-byte header whose bytes 4..8 are the table's length, little
// endian; then structures, each a formatted part (type, length, handle,
// fields) followed by its strings, each ended by a NUL, the set ended by
// another NUL (two NULs when it has none). A string field holds the
// string's 1-based number in that set, 0 for none. The chassis' asset tag
// field is at offset 8.
func chassisAssetTag(raw []byte) string {
	if len(raw) < 8 {
		return ""
	}
	t := raw[8:]
	if n := binary.LittleEndian.Uint32(raw[4:8]); uint64(n) < uint64(len(t)) {
		t = t[:n]
	}
	for len(t) >= 4 {
		typ, n := t[0], int(t[1])
		if n < 4 || n > len(t) {
			return ""
		}
		end := bytes.Index(t[n:], []byte{0, 0})
		if end < 0 {
			return ""
		}
		switch typ {
		case smbiosChassis:
			if n <= 8 {
				return ""
			}
			return smbiosString(t[n:n+end], t[8])
		case smbiosEndOfTable:
			return ""
		}
		t = t[n+end+2:]
	}
	return ""
}

// smbiosString returns string number i (1-based) of a structure's string
// set, its NUL-separated strings without the final two NULs.
func smbiosString(set []byte, i byte) string {
	if i == 0 || len(set) == 0 {
		return ""
	}
	for s := range bytes.SplitSeq(set, []byte{0}) {
		if i--; i == 0 {
			return strings.TrimSpace(string(s))
		}
	}
	return ""
}
