package acpi

import (
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fixtures are built here byte by byte to the kernel's layout, not with
// acpitest, so that the parsers and the fake's builders check each other.

// genlEventFixture lays out a struct acpi_genl_event: device_class[20] at
// 0, bus_id[15] at 20, one byte of padding, u32 type at 36, u32 data at 40,
// host byte order, 44 bytes.
func genlEventFixture(class, bus string, typ, data uint32) []byte {
	b := make([]byte, 44)
	copy(b[0:20], class)
	copy(b[20:35], bus)
	binary.NativeEndian.PutUint32(b[36:40], typ)
	binary.NativeEndian.PutUint32(b[40:44], data)
	return b
}

// genlMessageFixture wraps payload in a genlmsghdr (cmd, version, 2
// reserved bytes) and one nlattr (u16 len, u16 type), padded to 4 bytes.
func genlMessageFixture(cmd uint8, attrType uint16, payload []byte) []byte {
	b := []byte{cmd, 1, 0, 0}
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(payload)))
	b = binary.NativeEndian.AppendUint16(b, attrType)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// inputEventFixture lays out a struct input_event of 64-bit Linux (24
// bytes: tv_sec and tv_usec of 8 bytes, u16 type at 16, u16 code at 18,
// s32 value at 20), or of 32-bit Linux (16 bytes).
func inputEventFixture(typ, code uint16, value int32) []byte {
	long := strconv.IntSize / 8
	b := make([]byte, 2*long+8)
	binary.NativeEndian.PutUint16(b[2*long:], typ)
	binary.NativeEndian.PutUint16(b[2*long+2:], code)
	binary.NativeEndian.PutUint32(b[2*long+4:], uint32(value))
	return b
}

func TestInputEventSize(t *testing.T) {
	if strconv.IntSize == 64 {
		assert.Equal(t, 24, inputEventSize)
	} else {
		assert.Equal(t, 16, inputEventSize)
	}
}

func TestParseAcpidLine(t *testing.T) {
	for _, tc := range []struct {
		line  string
		press bool
		err   bool
		want  event
	}{
		// One press, as acpid reports it twice.
		{line: "button/power PBTN 00000080 00000000", press: true, want: event{"button/power", "PBTN", 0x80, 0}},
		{line: "button/power LNXPWRBN:00 00000080 00000001", press: true, want: event{"button/power", "LNXPWRBN:00", 0x80, 1}},
		{line: "button/power PNP0C0C:00 00000080 00000003", press: true, want: event{"button/power", "PNP0C0C:00", 0x80, 3}},
		{line: "button/power PBTN 00000080 00000000 K", press: true, want: event{"button/power", "PBTN", 0x80, 0}},
		{line: "button/power PWRF 00000080 00000001\r", press: true, want: event{"button/power", "PWRF", 0x80, 1}},
		{line: "button/power PBTN 80 0", press: true, want: event{"button/power", "PBTN", 0x80, 0}},
		// Other ACPI events.
		{line: "button/sleep SBTN 00000080 00000000", want: event{"button/sleep", "SBTN", 0x80, 0}},
		{line: "button/lid LID0 00000080 00000001", want: event{"button/lid", "LID0", 0x80, 1}},
		{line: "ac_adapter ACPI0003:00 00000080 00000000", want: event{"ac_adapter", "ACPI0003:00", 0x80, 0}},
		{line: "battery PNP0C0A:00 00000080 00000001", want: event{"battery", "PNP0C0A:00", 0x80, 1}},
		{line: "thermal_zone LNXTHERM:00 00000081 00000000", want: event{"thermal_zone", "LNXTHERM:00", 0x81, 0}},
		{line: "button/power PBTN 00000081 00000000", want: event{"button/power", "PBTN", 0x81, 0}},
		{line: "button/power PBTN 00000002 00000000", want: event{"button/power", "PBTN", 2, 0}},
		{line: "BUTTON/POWER PBTN 00000080 00000000", want: event{"BUTTON/POWER", "PBTN", 0x80, 0}},
		// Not four fields: input-layer lines and garbage.
		{line: "button/lid LID close", err: true},
		{line: "jack/headphone HEADPHONE plug", err: true},
		{line: "button/power PBTN", err: true},
		{line: "button/power", err: true},
		{line: "", err: true},
		{line: "button/power PBTN 0x80 0", err: true},
		{line: "button/power PBTN 000000080 0", err: true},
		{line: "button/power PBTN -80 0", err: true},
		{line: "button/power PBTN 80 zz", err: true},
		{line: "button/power PBTN 1_0 0", err: true},
	} {
		t.Run(tc.line, func(t *testing.T) {
			ev, err := parseAcpidLine(tc.line)
			if tc.err {
				require.ErrorIs(t, err, errMalformed)
				assert.False(t, ev.isPowerPress())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, ev)
			assert.Equal(t, tc.press, ev.isPowerPress())
		})
	}
}

func TestEventString(t *testing.T) {
	assert.Equal(t, "button/power LNXPWRBN:00 00000080 00000001", event{"button/power", "LNXPWRBN:00", 0x80, 1}.String())
}

func TestParseGenlEvent(t *testing.T) {
	ev, err := parseGenlEvent(genlEventFixture("button/power", "LNXPWRBN:00", 0x80, 7))
	require.NoError(t, err)
	assert.Equal(t, event{"button/power", "LNXPWRBN:00", 0x80, 7}, ev)
	assert.True(t, ev.isPowerPress())

	// Fields that fill their array have no NUL: they end at the array.
	full := genlEventFixture("abcdefghijklmnopqrst", "ABCDEFGHIJKLMNO", 1, 2)
	ev, err = parseGenlEvent(full)
	require.NoError(t, err)
	assert.Equal(t, "abcdefghijklmnopqrst", ev.class)
	assert.Equal(t, "ABCDEFGHIJKLMNO", ev.bus)

	// Longer is fine (a future kernel), shorter is not.
	_, err = parseGenlEvent(append(genlEventFixture("button/power", "X", 0x80, 0), 9, 9, 9, 9))
	assert.NoError(t, err)
	_, err = parseGenlEvent(genlEventFixture("button/power", "X", 0x80, 0)[:43])
	assert.ErrorIs(t, err, errMalformed)
	_, err = parseGenlEvent(nil)
	assert.ErrorIs(t, err, errMalformed)

	for _, e := range [][]byte{
		genlEventFixture("button/lid", "PNP0C0D:00", 0x80, 1),
		genlEventFixture("button/sleep", "PNP0C0E:00", 0x80, 1),
		genlEventFixture("ac_adapter", "ACPI0003:00", 0x80, 0),
		genlEventFixture("battery", "PNP0C0A:00", 0x80, 1),
		genlEventFixture("thermal_zone", "LNXTHERM:00", 0x81, 0),
		genlEventFixture("button/power", "LNXPWRBN:00", 0x02, 1),
		genlEventFixture("button/powerX", "LNXPWRBN:00", 0x80, 1),
	} {
		ev, err := parseGenlEvent(e)
		require.NoError(t, err)
		assert.False(t, ev.isPowerPress(), ev.String())
	}
}

func TestParseGenlMessage(t *testing.T) {
	power := genlEventFixture("button/power", "LNXPWRBN:00", 0x80, 1)
	ev, err := parseGenlMessage(genlMessageFixture(1, 1, power))
	require.NoError(t, err)
	assert.True(t, ev.isPowerPress())
	assert.Equal(t, "LNXPWRBN:00", ev.bus)

	// Another attribute before the event is skipped.
	two := genlMessageFixture(1, 7, []byte{1, 2, 3})
	two = append(two, genlMessageFixture(1, 1, power)[4:]...)
	ev, err = parseGenlMessage(two)
	require.NoError(t, err)
	assert.True(t, ev.isPowerPress())

	bad := map[string][]byte{
		"empty":            nil,
		"header only":      {1, 1, 0, 0},
		"short header":     {1, 1},
		"reserved set":     append([]byte{1, 1, 0, 1}, genlMessageFixture(1, 1, power)[4:]...),
		"other command":    genlMessageFixture(2, 1, power),
		"no event attr":    genlMessageFixture(1, 2, power),
		"short event":      genlMessageFixture(1, 1, power[:40]),
		"attr len too big": func() []byte { b := genlMessageFixture(1, 1, power); b[4] = 200; return b }(),
		"attr len too small": func() []byte {
			b := genlMessageFixture(1, 1, power)
			binary.NativeEndian.PutUint16(b[4:], 2)
			return b
		}(),
		"truncated": genlMessageFixture(1, 1, power)[:30],
	}
	for name, b := range bad {
		t.Run(name, func(t *testing.T) {
			ev, err := parseGenlMessage(b)
			assert.ErrorIs(t, err, errMalformed)
			assert.False(t, ev.isPowerPress())
		})
	}
}

func TestInputPresses(t *testing.T) {
	press := inputEventFixture(1, 116, 1)
	var stream []byte
	for _, e := range [][]byte{
		inputEventFixture(1, 116, 0), // release
		inputEventFixture(1, 116, 2), // autorepeat
		inputEventFixture(1, 30, 1),  // KEY_A
		inputEventFixture(0, 0, 0),   // EV_SYN
		inputEventFixture(4, 4, 116), // EV_MSC MSC_SCAN
		inputEventFixture(2, 116, 1), // EV_REL, code 116
		inputEventFixture(1, 142, 1), // KEY_SLEEP
		press,
		inputEventFixture(0, 0, 0),
	} {
		stream = append(stream, e...)
	}
	offs, n := inputPresses(stream)
	assert.Equal(t, []int{7 * inputEventSize}, offs)
	assert.Equal(t, len(stream), n)

	// A partial record is left for the next read.
	offs, n = inputPresses(append(press, press[:5]...))
	assert.Equal(t, []int{0}, offs)
	assert.Equal(t, inputEventSize, n)
	offs, n = inputPresses(press[:inputEventSize-1])
	assert.Empty(t, offs)
	assert.Zero(t, n)
}

func TestInputStreamReassembles(t *testing.T) {
	press := inputEventFixture(1, 116, 1)
	stream := append(append(inputEventFixture(1, 30, 1), press...), inputEventFixture(1, 116, 0)...)
	for size := 1; size <= len(stream); size++ {
		var s inputStream
		var got [][]byte
		for i := 0; i < len(stream); i += size {
			got = append(got, s.feed(stream[i:min(i+size, len(stream))])...)
		}
		require.Equal(t, [][]byte{press}, got, "reads of %d bytes", size)
		assert.Empty(t, s.pending)
	}
}

func TestHasKey(t *testing.T) {
	for _, tc := range []struct {
		bitmap string
		bits   int
		code   int
		has    bool
		err    bool
	}{
		// A real ACPI "Power Button" device (LNXPWRBN) on 64-bit Linux.
		{bitmap: "10000000000000 0\n", bits: 64, code: 116, has: true},
		// The same on 32-bit Linux: KEY_POWER is bit 20 of word 3.
		{bitmap: "100000 0 0 0\n", bits: 32, code: 116, has: true},
		{bitmap: "10000000000000 0", bits: 64, code: 115},
		{bitmap: "10000000000000 0", bits: 64, code: 52},
		// A sleep button (KEY_SLEEP 142) only.
		{bitmap: "4000 0 0", bits: 64, code: 116},
		{bitmap: "4000 0 0", bits: 64, code: 142, has: true},
		{bitmap: "0\n", bits: 64, code: 116},
		{bitmap: "fffffffffffffffe", bits: 64, code: 116},
		{bitmap: "", bits: 64, err: true},
		{bitmap: "\n", bits: 64, err: true},
		{bitmap: "xyz 0", bits: 64, err: true},
		{bitmap: "10000000000000000 0", bits: 64, err: true},
		{bitmap: "-1 0", bits: 64, err: true},
		{bitmap: "100000000 0", bits: 32, err: true},
	} {
		t.Run(tc.bitmap, func(t *testing.T) {
			has, err := hasKey(tc.bitmap, tc.code, tc.bits)
			if tc.err {
				assert.ErrorIs(t, err, errMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.has, has)
		})
	}
}

func TestDeduper(t *testing.T) {
	t0 := time.Now()
	d := deduper{window: 2 * time.Second}
	assert.True(t, d.accept(t0), "first press")
	assert.False(t, d.accept(t0.Add(time.Millisecond)), "the same press from another transport")
	assert.False(t, d.accept(t0.Add(-time.Millisecond)), "a transport that stamped it earlier")
	assert.False(t, d.accept(t0.Add(1999*time.Millisecond)))
	assert.True(t, d.accept(t0.Add(2*time.Second)), "a new press")
	assert.False(t, d.accept(t0.Add(3*time.Second)), "the window is fixed from the last notice, not sliding")
	assert.True(t, d.accept(t0.Add(4*time.Second)))

	off := deduper{window: -1}
	assert.True(t, off.accept(t0))
	assert.True(t, off.accept(t0))
}

func TestTransportString(t *testing.T) {
	assert.Equal(t, "none", Transport(0).String())
	assert.Equal(t, "netlink", Netlink.String())
	assert.Equal(t, "acpid+input", (Acpid | Input).String())
	assert.Equal(t, "netlink+acpid+input", AllTransports.String())
	assert.Equal(t, "input+transport(0x80)", (Input | 0x80).String())
}

func TestConfigDefaults(t *testing.T) {
	s := New(Config{})
	c := s.cfg.withDefaults()
	assert.Equal(t, Config{
		Transports:   AllTransports,
		AcpidSocket:  "/var/run/acpid.socket",
		InputDevices: "/dev/input/event*",
		Logger:       slog.Default(), // nil means slog.Default()
		dedupeWindow: 2 * time.Second,
		backoff:      100 * time.Millisecond,
		maxBackoff:   5 * time.Second,
	}, c)
	assert.Equal(t, "/sys", c.under(sysfsDir))
	assert.Equal(t, Config{}, s.cfg)
	assert.Equal(t, "acpi", s.Name())

	root := filepath.Join("tmp", "fake")
	s = New(Config{Root: root})
	c = s.cfg.withDefaults()
	assert.Equal(t, filepath.Join(root, "var/run/acpid.socket"), c.AcpidSocket)
	assert.Equal(t, filepath.Join(root, "dev/input/event*"), c.InputDevices)
	assert.Equal(t, filepath.Join(root, "sys"), c.under(sysfsDir))
	assert.Equal(t, Config{Root: root}, s.cfg, "the defaults are not taken for explicit places")

	c = Tune(Config{}, Tuning{Backoff: time.Minute, DedupeWindow: -1}).withDefaults()
	assert.Equal(t, time.Minute, c.maxBackoff, "max is at least base")
	assert.Equal(t, time.Duration(-1), c.dedupeWindow)
}
