package acpitest_test

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/acpi/acpitest"
)

func TestGenlEventLayout(t *testing.T) {
	b := acpitest.GenlEvent("button/power", "LNXPWRBN:00", 0x80, 3)
	require.Len(t, b, 44)
	assert.Equal(t, "button/power\x00", string(b[:13]))
	assert.Equal(t, "LNXPWRBN:00\x00", string(b[20:32]))
	assert.Equal(t, uint32(0x80), binary.NativeEndian.Uint32(b[36:]))
	assert.Equal(t, uint32(3), binary.NativeEndian.Uint32(b[40:]))
	assert.Equal(t, b, acpitest.PowerButtonGenlEvent(3))

	// Cut like strscpy: a NUL always ends each field.
	long := acpitest.GenlEvent("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 0, 0)
	assert.Equal(t, byte(0), long[19])
	assert.Equal(t, byte(0), long[34])
	assert.Equal(t, byte(0), long[35], "padding")
}

func TestGenlMessageParsesWithGenetlink(t *testing.T) {
	ev := acpitest.PowerButtonGenlEvent(1)
	frame := acpitest.NetlinkMessage(26, acpitest.GenlMessage(ev))

	var nm netlink.Message
	require.NoError(t, nm.UnmarshalBinary(frame))
	assert.Equal(t, netlink.HeaderType(26), nm.Header.Type)
	assert.Equal(t, uint32(len(frame)), nm.Header.Length)

	var gm genetlink.Message
	require.NoError(t, gm.UnmarshalBinary(nm.Data))
	assert.Equal(t, uint8(acpitest.GenlCmdEvent), gm.Header.Command)
	ad, err := netlink.NewAttributeDecoder(gm.Data)
	require.NoError(t, err)
	require.True(t, ad.Next())
	assert.Equal(t, uint16(acpitest.GenlAttrEvent), ad.Type())
	assert.Equal(t, ev, ad.Bytes())
	assert.False(t, ad.Next())
	require.NoError(t, ad.Err())
}

func TestInputEventLayout(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	b := acpitest.InputEvent(at, acpitest.EvKey, acpitest.KeyPower, 1)
	require.Len(t, b, acpitest.InputEventSize)
	if strconv.IntSize != 64 {
		t.Skip("the offsets below are 64-bit Linux's")
	}
	assert.Equal(t, 24, acpitest.InputEventSize)
	assert.Equal(t, uint64(1700000000), binary.NativeEndian.Uint64(b[0:]))
	assert.Equal(t, uint64(123456), binary.NativeEndian.Uint64(b[8:]))
	assert.Equal(t, uint16(1), binary.NativeEndian.Uint16(b[16:]))
	assert.Equal(t, uint16(116), binary.NativeEndian.Uint16(b[18:]))
	assert.Equal(t, uint32(1), binary.NativeEndian.Uint32(b[20:]))

	p := acpitest.PowerPress(at)
	require.Len(t, p, 4*24)
	assert.Equal(t, b, p[:24])
	assert.Equal(t, uint32(0), binary.NativeEndian.Uint32(p[2*24+20:]), "then a release")
}

func TestKeyBitmap(t *testing.T) {
	if strconv.IntSize != 64 {
		t.Skip("64-bit words")
	}
	// As sysfs prints an ACPI power button's capabilities.
	assert.Equal(t, "10000000000000 0\n", acpitest.KeyBitmap(acpitest.KeyPower))
	assert.Equal(t, "0\n", acpitest.KeyBitmap())
	assert.Equal(t, "4000 0 40000000\n", acpitest.KeyBitmap(acpitest.KeyA, acpitest.KeySleep))
	assert.Equal(t, "c000 10000000000000 0\n", acpitest.KeyBitmap(acpitest.KeyPower, acpitest.KeySleep, acpitest.KeyWakeUp))
}
