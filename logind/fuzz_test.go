package logind

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// signalBytes encodes a signal from logind as it crosses the bus: the
// header fields the daemon delivers (sender included) and the body.
func signalBytes(tb testing.TB, order binary.ByteOrder, sender, path, member string, body ...any) []byte {
	tb.Helper()
	msg := &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldSender:    dbus.MakeVariant(sender),
			dbus.FieldPath:      dbus.MakeVariant(dbus.ObjectPath(path)),
			dbus.FieldInterface: dbus.MakeVariant(iface),
			dbus.FieldMember:    dbus.MakeVariant(member),
		},
		Body: body,
	}
	if len(body) > 0 {
		msg.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(body...))
	}
	var b bytes.Buffer
	if err := msg.EncodeTo(&b, order); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// signalOf turns a message into the Signal godbus hands its signal
// handler, as conn.handleSignal does.
func signalOf(msg *dbus.Message) *dbus.Signal {
	if msg.Type != dbus.TypeSignal {
		return nil
	}
	i, _ := msg.Headers[dbus.FieldInterface].Value().(string)
	m, _ := msg.Headers[dbus.FieldMember].Value().(string)
	s, _ := msg.Headers[dbus.FieldSender].Value().(string)
	p, _ := msg.Headers[dbus.FieldPath].Value().(dbus.ObjectPath)
	return &dbus.Signal{Sender: s, Path: p, Name: i + "." + m, Body: msg.Body}
}

var goodEvent = regexp.MustCompile(`^shutdown(/[a-z0-9-]{1,32})?$`)

// FuzzShutdownSignal feeds D-Bus messages, seeded with logind's signals
// as they are on the wire, through the decoder and parseShutdown: no
// panic, and a shutdown is only ever Terminate or Reboot, with a clean
// Event.
func FuzzShutdownSignal(f *testing.F) {
	md := func(typ any) map[string]dbus.Variant { return map[string]dbus.Variant{"type": dbus.MakeVariant(typ)} }
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdownWithMetadata", true, md("poweroff")))
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdownWithMetadata", false, md("soft-reboot")))
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdown", true))
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdown", false))
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdownWithMetadata", true, md(uint32(7))))
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdownWithMetadata", true, map[string]dbus.Variant{}))
		f.Add(signalBytes(f, order, ":1.5", objPath, "PrepareForShutdown", "true"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := dbus.DecodeMessage(bytes.NewReader(data))
		if err != nil {
			return
		}
		sig := signalOf(msg)
		if sig == nil {
			return
		}
		s, err := parseShutdown(sig)
		if err != nil {
			return
		}
		if s.typ != "" && s.typ != cleanType(s.typ) {
			t.Fatalf("type %q not cleaned", s.typ)
		}
		n := noticeOf(s.typ, testNow, delayOf(5_000_000), "")
		if n.Kind != termsig.Terminate && n.Kind != termsig.Reboot {
			t.Fatalf("kind %v", n.Kind)
		}
		if !goodEvent.MatchString(n.Event) {
			t.Fatalf("event %q", n.Event)
		}
	})
}

func TestParseShutdown(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []any
		want shutdownSignal
		ok   bool
	}{
		{signalOld, []any{true}, shutdownSignal{active: true}, true},
		{signalOld, []any{false}, shutdownSignal{}, true},
		{signalOld, []any{}, shutdownSignal{}, false},
		{signalOld, []any{"true"}, shutdownSignal{}, false},
		{signalOld, []any{true, true}, shutdownSignal{}, false},
		{signalNew, []any{true, map[string]dbus.Variant{"type": dbus.MakeVariant("reboot")}}, shutdownSignal{true, "reboot"}, true},
		{signalNew, []any{true, map[string]dbus.Variant{"type": dbus.MakeVariant(7)}}, shutdownSignal{active: true}, true},
		{signalNew, []any{true, map[string]dbus.Variant{}}, shutdownSignal{active: true}, true},
		{signalNew, []any{true, map[string]dbus.Variant{"type": dbus.MakeVariant("../../etc")}}, shutdownSignal{active: true}, true},
		{signalNew, []any{true}, shutdownSignal{}, false},
		{signalNew, []any{true, "reboot"}, shutdownSignal{}, false},
		{iface + ".SessionNew", []any{true}, shutdownSignal{}, false},
	} {
		got, err := parseShutdown(&dbus.Signal{Name: tc.name, Path: objPath, Body: tc.body})
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("%s%v = %+v, %v; want %+v, ok %v", tc.name, tc.body, got, err, tc.want, tc.ok)
		}
	}
}

func TestDelayOf(t *testing.T) {
	for _, tc := range []struct {
		usec uint64
		want int64
	}{
		{0, 0},
		{5_000_000, 5e9},
		{1<<64 - 1, -1}, // "infinity"
		{1 << 62, -1},   // more than a Duration holds
	} {
		if got := delayOf(tc.usec); int64(got) != tc.want {
			t.Errorf("delayOf(%d) = %d, want %d", tc.usec, got, tc.want)
		}
	}
}

var testNow = mustTime("2026-11-30T10:00:00Z")
