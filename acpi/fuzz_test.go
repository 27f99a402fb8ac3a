package acpi

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
)

// The fuzz tests check that the parsers never panic and never take for a
// press anything that is not one: each press they report is checked against
// the protocol's definition, computed here independently of the parser.

func FuzzAcpidLine(f *testing.F) {
	for _, s := range []string{
		"button/power PBTN 00000080 00000000",
		"button/power LNXPWRBN:00 00000080 00000001",
		"button/power PBTN 00000080 00000000 K",
		"button/sleep SBTN 00000080 00000000",
		"button/lid LID close",
		"button/lid LID0 00000080 00000001",
		"ac_adapter ACPI0003:00 00000080 00000000",
		"battery PNP0C0A:00 00000080 00000001",
		"thermal_zone LNXTHERM:00 00000081 00000000",
		"jack/headphone HEADPHONE plug",
		"video/brightnessup BRTUP 00000086 00000000",
		"",
		"button/power PBTN 0x80 0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		ev, err := parseAcpidLine(line)
		if err != nil {
			if ev != (event{}) {
				t.Fatalf("error %v with event %v", err, ev)
			}
			return
		}
		if !ev.isPowerPress() {
			return
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || fields[0] != "button/power" || len(fields[2]) > 8 {
			t.Fatalf("press from %q", line)
		}
		if typ, err := strconv.ParseUint(fields[2], 16, 32); err != nil || typ != 0x80 {
			t.Fatalf("press from %q", line)
		}
	})
}

func FuzzGenlMessage(f *testing.F) {
	for _, e := range [][]byte{
		genlEventFixture("button/power", "LNXPWRBN:00", 0x80, 1),
		genlEventFixture("button/power", "PNP0C0C:00", 0x80, 2),
		genlEventFixture("button/lid", "PNP0C0D:00", 0x80, 1),
		genlEventFixture("button/sleep", "PNP0C0E:00", 0x80, 1),
		genlEventFixture("ac_adapter", "ACPI0003:00", 0x80, 0),
		genlEventFixture("battery", "PNP0C0A:00", 0x80, 1),
		genlEventFixture("thermal_zone", "LNXTHERM:00", 0x81, 0),
		genlEventFixture("processor", "LNXCPU:00", 0x80, 0),
	} {
		f.Add(genlMessageFixture(1, 1, e))
		f.Add(e)
	}
	f.Add([]byte{1, 1, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if ev, err := parseGenlMessage(b); err == nil && ev.isPowerPress() {
			// The message must hold an acpi_genl_event for a power-button
			// press after the generic netlink and attribute headers.
			ok := false
			for off := 8; off+44 <= len(b); off += 4 {
				if bytes.Equal(b[off:off+13], []byte("button/power\x00")) && binary.NativeEndian.Uint32(b[off+36:]) == 0x80 {
					ok = true
				}
			}
			if b[0] != 1 || !ok {
				t.Fatalf("press from % x", b)
			}
		}
		if ev, err := parseGenlEvent(b); err == nil && ev.isPowerPress() {
			if !bytes.Equal(b[:13], []byte("button/power\x00")) || binary.NativeEndian.Uint32(b[36:]) != 0x80 {
				t.Fatalf("press from event % x", b)
			}
		}
	})
}

func FuzzInputEvents(f *testing.F) {
	var typing []byte
	for _, e := range [][]byte{
		inputEventFixture(4, 4, 30), inputEventFixture(1, 30, 1), inputEventFixture(0, 0, 0),
		inputEventFixture(1, 30, 2), inputEventFixture(1, 30, 0), inputEventFixture(0, 0, 0),
	} {
		typing = append(typing, e...)
	}
	var press []byte
	for _, e := range [][]byte{
		inputEventFixture(1, 116, 1), inputEventFixture(0, 0, 0),
		inputEventFixture(1, 116, 0), inputEventFixture(0, 0, 0),
	} {
		press = append(press, e...)
	}
	f.Add(press, uint8(7))
	f.Add(typing, uint8(24))
	f.Add(append(typing, press...), uint8(1))
	f.Add(press[:30], uint8(3))
	f.Add(inputEventFixture(1, 116, 2), uint8(0))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		offs, n := inputPresses(b)
		if n%inputEventSize != 0 || n > len(b) || len(b)-n >= inputEventSize {
			t.Fatalf("read %d of %d bytes", n, len(b))
		}
		// Every record that is a press, and nothing else.
		var want []int
		for off := 0; off+inputEventSize <= len(b); off += inputEventSize {
			r := b[off : off+inputEventSize]
			long := strconv.IntSize / 8
			if binary.NativeEndian.Uint16(r[2*long:]) == 1 &&
				binary.NativeEndian.Uint16(r[2*long+2:]) == 116 &&
				binary.NativeEndian.Uint32(r[2*long+4:]) == 1 {
				want = append(want, off)
			}
		}
		if len(offs) != len(want) {
			t.Fatalf("presses at %v, want %v", offs, want)
		}
		for i := range want {
			if offs[i] != want[i] {
				t.Fatalf("presses at %v, want %v", offs, want)
			}
		}
		// Reads of any size give the same presses.
		size := int(chunk)%(2*inputEventSize) + 1
		var s inputStream
		got := 0
		for i := 0; i < len(b); i += size {
			for _, rec := range s.feed(b[i:min(i+size, len(b))]) {
				if got >= len(want) || !bytes.Equal(rec, b[want[got]:want[got]+inputEventSize]) {
					t.Fatalf("press %d is % x", got, rec)
				}
				got++
			}
		}
		if got != len(want) {
			t.Fatalf("%d presses in reads of %d bytes, want %d", got, size, len(want))
		}
	})
}

func FuzzKeyBitmap(f *testing.F) {
	for _, s := range []string{"10000000000000 0\n", "0\n", "4000 0 0", "402000000 3803078f800d001 feffffdfffefffff fffffffffffffffe", "", "zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		has, err := hasKey(s, 116, 64)
		if err != nil || !has {
			return
		}
		words := strings.Fields(s)
		w, perr := strconv.ParseUint(words[len(words)-2], 16, 64)
		if perr != nil || w&(1<<52) == 0 {
			t.Fatalf("KEY_POWER in %q", s)
		}
	})
}
