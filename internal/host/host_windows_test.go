package host

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This machine's registry values and SMBIOS table can be read: every
// Windows machine with firmware strings has both.
func TestReadBIOSThisMachine(t *testing.T) {
	b := readBIOS("/")
	t.Logf("%+v", b)
	if b.SystemVendor == "" {
		t.Skip("no BIOS values in the registry")
	}
	raw := smbiosTable()
	require.Greater(t, len(raw), 8, "no SMBIOS table")
	assert.LessOrEqual(t, int(binary.LittleEndian.Uint32(raw[4:8])), len(raw)-8, "table length")
	assert.Equal(t, chassisAssetTag(raw), b.AssetTag)
}
