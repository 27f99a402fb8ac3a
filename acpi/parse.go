package acpi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// The parsers in this file read bytes from outside the process (acpid's
// socket, the kernel, input devices). They are pure and portable, so that
// they are fuzzed on every system, and none of them panics: a payload they
// cannot read is an error, and only a well-formed power-button press
// satisfies isPowerPress.

// What a power-button press looks like (Linux drivers/acpi/button.c): the
// button driver reports ACPI_BUTTON_NOTIFY_STATUS for the device class
// "button/power", on netlink and, through acpid, on its socket.
const (
	classPowerButton = "button/power"
	typeButtonStatus = 0x80 // ACPI_BUTTON_NOTIFY_STATUS
)

// Generic netlink layout (Linux drivers/acpi/event.c).
const (
	genlFamily    = "acpi_event"
	genlGroup     = "acpi_mc_group"
	genlCmdEvent  = 1  // ACPI_GENL_CMD_EVENT
	genlAttrEvent = 1  // ACPI_GENL_ATTR_EVENT
	genlEventSize = 44 // sizeof(struct acpi_genl_event)
	genlClassLen  = 20 // device_class[20]
	genlBusLen    = 15 // bus_id[15], then one byte of padding
	genlTypeOff   = 36 // u32 type
	genlDataOff   = 40 // u32 data
)

// Input layer (Linux include/uapi/linux/input.h and input-event-codes.h).
const (
	evKey    = 1   // EV_KEY
	keyPower = 116 // KEY_POWER
	keyPress = 1   // value of a press; 0 is a release, 2 an autorepeat

	// longSize is the size of a C long, which is Go's int on every Linux
	// port: struct timeval is two longs.
	longSize = strconv.IntSize / 8
	// inputEventSize is sizeof(struct input_event): 24 bytes on 64-bit
	// Linux, 16 on 32-bit.
	inputEventSize = 2*longSize + 8
)

var errMalformed = errors.New("acpi: malformed event")

// An event is an ACPI event as acpid and the kernel's netlink family
// describe it.
type event struct {
	class string // device class, such as "button/power" or "ac_adapter"
	bus   string // bus id, such as "LNXPWRBN:00" or "PBTN"
	typ   uint32
	data  uint32
}

// isPowerPress reports whether e is a press of the power button. The class
// alone is not enough: the button driver only ever reports type 0x80 for a
// press, so anything else under that class is not one.
func (e event) isPowerPress() bool {
	return e.class == classPowerButton && e.typ == typeButtonStatus
}

// String formats e as acpid does ("%s %s %08x %08x").
func (e event) String() string {
	return fmt.Sprintf("%s %s %08x %08x", e.class, e.bus, e.typ, e.data)
}

// parseAcpidLine parses one line of acpid's socket protocol: device class,
// bus id, type and data in hex, such as
//
//	button/power PBTN 00000080 00000000
//
// Tokens after the fourth (acpid may append " K") are ignored. A line
// without those four fields, such as a "jack/headphone HEADPHONE plug"
// line, is an error.
func parseAcpidLine(line string) (event, error) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return event{}, fmt.Errorf("%w: acpid line has %d fields, want at least 4", errMalformed, len(f))
	}
	typ, err := parseHex32(f[2])
	if err != nil {
		return event{}, fmt.Errorf("%w: acpid type %q", errMalformed, clip(f[2]))
	}
	data, err := parseHex32(f[3])
	if err != nil {
		return event{}, fmt.Errorf("%w: acpid data %q", errMalformed, clip(f[3]))
	}
	return event{class: f[0], bus: f[1], typ: typ, data: data}, nil
}

// parseHex32 parses 1 to 8 hex digits, without prefix or sign.
func parseHex32(s string) (uint32, error) {
	if len(s) == 0 || len(s) > 8 {
		return 0, errMalformed
	}
	v, err := strconv.ParseUint(s, 16, 32)
	return uint32(v), err
}

// parseGenlMessage parses the payload of a netlink message of the
// acpi_event family: a generic netlink header with command
// ACPI_GENL_CMD_EVENT, then attributes, of which ACPI_GENL_ATTR_EVENT holds
// a struct acpi_genl_event.
func parseGenlMessage(b []byte) (event, error) {
	var m genetlink.Message
	if err := m.UnmarshalBinary(b); err != nil {
		return event{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if m.Header.Command != genlCmdEvent {
		return event{}, fmt.Errorf("%w: generic netlink command %d, want %d", errMalformed, m.Header.Command, genlCmdEvent)
	}
	ad, err := netlink.NewAttributeDecoder(m.Data)
	if err != nil {
		return event{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	var payload []byte
	for ad.Next() {
		if ad.Type() == genlAttrEvent && payload == nil {
			payload = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return event{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if payload == nil {
		return event{}, fmt.Errorf("%w: no ACPI_GENL_ATTR_EVENT attribute", errMalformed)
	}
	return parseGenlEvent(payload)
}

// parseGenlEvent parses a struct acpi_genl_event:
//
//	char device_class[20]; char bus_id[15]; /* pad */ u32 type; u32 data;
//
// in host byte order. Bytes after the 44 of the struct are ignored, so that
// a kernel that grows the struct is still understood.
func parseGenlEvent(b []byte) (event, error) {
	if len(b) < genlEventSize {
		return event{}, fmt.Errorf("%w: acpi_genl_event of %d bytes, want %d", errMalformed, len(b), genlEventSize)
	}
	return event{
		class: cString(b[:genlClassLen]),
		bus:   cString(b[genlClassLen : genlClassLen+genlBusLen]),
		typ:   binary.NativeEndian.Uint32(b[genlTypeOff:]),
		data:  binary.NativeEndian.Uint32(b[genlDataOff:]),
	}, nil
}

// cString returns the bytes of b up to its first NUL, or all of b.
func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// An inputEvent is a struct input_event, without its timestamp.
type inputEvent struct {
	typ   uint16
	code  uint16
	value int32
}

func (e inputEvent) isPowerPress() bool {
	return e.typ == evKey && e.code == keyPower && e.value == keyPress
}

// inputPresses reads the whole struct input_event records at the start of
// b and returns the offsets of the power-button presses among them, and how
// many bytes it read (a multiple of inputEventSize): the rest is a partial
// record, to be completed by the next read. A release (value 0) and an
// autorepeat (value 2) are not presses.
func inputPresses(b []byte) (presses []int, n int) {
	for ; len(b)-n >= inputEventSize; n += inputEventSize {
		if decodeInputEvent(b[n : n+inputEventSize]).isPowerPress() {
			presses = append(presses, n)
		}
	}
	return presses, n
}

// An inputStream puts input_event records back together from reads of any
// size. A device returns whole records, but a FIFO standing in for one
// need not.
type inputStream struct {
	pending []byte
}

// feed adds b to the stream and returns the power-button presses among the
// records now complete, each as its bytes.
func (s *inputStream) feed(b []byte) (presses [][]byte) {
	s.pending = append(s.pending, b...)
	offs, n := inputPresses(s.pending)
	for _, o := range offs {
		presses = append(presses, bytes.Clone(s.pending[o:o+inputEventSize]))
	}
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return presses
}

// decodeInputEvent decodes one struct input_event of inputEventSize bytes:
// struct timeval (two longs), u16 type, u16 code, s32 value, in host byte
// order.
func decodeInputEvent(r []byte) inputEvent {
	return inputEvent{
		typ:   binary.NativeEndian.Uint16(r[2*longSize:]),
		code:  binary.NativeEndian.Uint16(r[2*longSize+2:]),
		value: int32(binary.NativeEndian.Uint32(r[2*longSize+4:])),
	}
}

// hasKey reports whether the key capability bitmap of an input device, as
// sysfs prints it in capabilities/key, includes code. The bitmap is words
// of wordBits bits (the kernel's long) in hex, most significant first,
// separated by spaces; leading zero words are left out, so "0" and
// "10000000000000 0" are both complete bitmaps.
func hasKey(bitmap string, code, wordBits int) (bool, error) {
	words := strings.Fields(bitmap)
	if len(words) == 0 {
		return false, fmt.Errorf("%w: empty key bitmap", errMalformed)
	}
	has := false
	for i, w := range words {
		if len(w) > wordBits/4 {
			return false, fmt.Errorf("%w: key bitmap word %q", errMalformed, clip(w))
		}
		v, err := strconv.ParseUint(w, 16, wordBits)
		if err != nil {
			return false, fmt.Errorf("%w: key bitmap word %q", errMalformed, clip(w))
		}
		if len(words)-1-i == code/wordBits && v&(1<<(code%wordBits)) != 0 {
			has = true
		}
	}
	return has, nil
}

// clip shortens s for an error message or a log line, and replaces bytes
// that are not printable ASCII, since s comes from outside.
func clip(s string) string {
	const max = 40
	if len(s) > max {
		s = s[:max]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
