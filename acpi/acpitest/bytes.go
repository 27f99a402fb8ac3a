package acpitest

import (
	"encoding/binary"
	"strconv"
	"strings"
	"time"
)

// Layout of struct acpi_genl_event (Linux drivers/acpi/event.c) and its
// generic netlink message.
const (
	GenlFamily    = "acpi_event"
	GenlGroup     = "acpi_mc_group"
	GenlCmdEvent  = 1  // ACPI_GENL_CMD_EVENT
	GenlAttrEvent = 1  // ACPI_GENL_ATTR_EVENT
	GenlEventSize = 44 // sizeof(struct acpi_genl_event)
)

// Input event types and codes (Linux include/uapi/linux/input-event-codes.h).
const (
	EvSyn     = 0
	EvKey     = 1
	KeyA      = 30
	KeyPower  = 116
	KeySleep  = 142
	KeyWakeUp = 143
)

// InputEventSize is sizeof(struct input_event) on this system: 24 bytes on
// 64-bit Linux (a struct timeval of two longs, u16 type, u16 code, s32
// value), 16 on 32-bit.
const InputEventSize = 2*strconv.IntSize/8 + 8

// GenlEvent returns a struct acpi_genl_event in host byte order:
// device_class[20], bus_id[15], a byte of padding, u32 type at offset 36
// and u32 data at 40. class and bus are cut to 19 and 14 bytes, as the
// kernel's strscpy cuts them, so that they stay NUL-terminated.
func GenlEvent(class, bus string, typ, data uint32) []byte {
	b := make([]byte, GenlEventSize)
	copy(b[:19], class)
	copy(b[20:34], bus)
	binary.NativeEndian.PutUint32(b[36:], typ)
	binary.NativeEndian.PutUint32(b[40:], data)
	return b
}

// PowerButtonGenlEvent returns the event the kernel's button driver sends
// for the count-th press of the power button: class "button/power", bus
// "LNXPWRBN:00", type 0x80.
func PowerButtonGenlEvent(count uint32) []byte {
	return GenlEvent("button/power", "LNXPWRBN:00", 0x80, count)
}

// GenlMessage returns the generic netlink message that carries event, as
// the kernel multicasts it: a generic netlink header (command
// ACPI_GENL_CMD_EVENT, version 1) and one attribute, ACPI_GENL_ATTR_EVENT,
// padded to 4 bytes.
func GenlMessage(event []byte) []byte {
	b := []byte{GenlCmdEvent, 1, 0, 0}
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(event)))
	b = binary.NativeEndian.AppendUint16(b, GenlAttrEvent)
	b = append(b, event...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// NetlinkMessage returns genl framed as a netlink message of the given
// family ID (the acpi_event family's ID is dynamic: resolve it by name), as
// it travels on a netlink socket.
func NetlinkMessage(family uint16, genl []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(16+len(genl)))
	b = binary.NativeEndian.AppendUint16(b, family)
	b = binary.NativeEndian.AppendUint16(b, 0) // flags
	b = binary.NativeEndian.AppendUint32(b, 0) // sequence
	b = binary.NativeEndian.AppendUint32(b, 0) // port: the kernel
	return append(b, genl...)
}

// InputEvent returns a struct input_event in host byte order.
func InputEvent(t time.Time, typ, code uint16, value int32) []byte {
	b := make([]byte, 0, InputEventSize)
	if strconv.IntSize == 64 {
		b = binary.NativeEndian.AppendUint64(b, uint64(t.Unix()))
		b = binary.NativeEndian.AppendUint64(b, uint64(t.Nanosecond()/1000))
	} else {
		b = binary.NativeEndian.AppendUint32(b, uint32(t.Unix()))
		b = binary.NativeEndian.AppendUint32(b, uint32(t.Nanosecond()/1000))
	}
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, code)
	return binary.NativeEndian.AppendUint32(b, uint32(value))
}

// PowerPress returns the events that the kernel's ACPI button driver
// reports for one press of the power button: KEY_POWER down, a sync, KEY_POWER
// up, a sync.
func PowerPress(t time.Time) []byte {
	var b []byte
	b = append(b, InputEvent(t, EvKey, KeyPower, 1)...)
	b = append(b, InputEvent(t, EvSyn, 0, 0)...)
	b = append(b, InputEvent(t, EvKey, KeyPower, 0)...)
	return append(b, InputEvent(t, EvSyn, 0, 0)...)
}

// KeyBitmap returns the key capability bitmap of a device with keys as
// sysfs prints it in capabilities/key: words of a long in hex, most
// significant first, separated by spaces, leading zero words left out, and
// a newline.
func KeyBitmap(keys ...int) string {
	const bits = strconv.IntSize
	var words []uint64
	for _, k := range keys {
		for len(words) <= k/bits {
			words = append(words, 0)
		}
		words[k/bits] |= 1 << (k % bits)
	}
	if len(words) == 0 {
		words = []uint64{0}
	}
	s := make([]string, len(words))
	for i, w := range words {
		s[len(words)-1-i] = strconv.FormatUint(w, 16)
	}
	return strings.Join(s, " ") + "\n"
}
