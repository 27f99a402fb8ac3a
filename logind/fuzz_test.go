package logind

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/termsig/termsig"
)

// signalBytes encodes a signal from logind as it crosses the bus: the
// header fields the daemon delivers (sender included) and the body. The
// member is the Manager's unless it names its interface
// ("org.freedesktop.DBus.Properties.PropertiesChanged").
func signalBytes(tb testing.TB, order binary.ByteOrder, sender, path, member string, body ...any) []byte {
	tb.Helper()
	in := iface
	if i := strings.LastIndex(member, "."); i >= 0 {
		in, member = member[:i], member[i+1:]
	}
	msg := &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldSender:    dbus.MakeVariant(sender),
			dbus.FieldPath:      dbus.MakeVariant(dbus.ObjectPath(path)),
			dbus.FieldInterface: dbus.MakeVariant(in),
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
// as they are on the wire, through the decoder, the filter and
// parseShutdown: no panic, and a shutdown is only ever Terminate or
// Reboot, with a clean Event.
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
		f.Add(signalBytes(f, order, ":1.5", objPath, propertiesChanged, iface,
			map[string]dbus.Variant{scheduledShutdown: dbus.MakeVariant(st{"poweroff", 1796234406932978})}, []string{}))
		f.Add(signalBytes(f, order, ":1.5", objPath, propertiesChanged, iface,
			map[string]dbus.Variant{"DelayInhibited": dbus.MakeVariant("shutdown")}, []string{scheduledShutdown}))
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
		// The filter judges every signal the bus delivers, with logind's
		// name known and not yet.
		known := newFilter()
		known.learn(":1.5")
		known.DeliverSignal("", "", sig)
		newFilter().DeliverSignal("", "", sig)
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

// replyBytes encodes a method reply carrying body as it crosses the bus.
func replyBytes(tb testing.TB, order binary.ByteOrder, body ...any) []byte {
	tb.Helper()
	msg := &dbus.Message{
		Type: dbus.TypeMethodReply,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldSender:      dbus.MakeVariant(":1.5"),
			dbus.FieldReplySerial: dbus.MakeVariant(uint32(7)),
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

type st struct {
	Type string
	USec uint64
}

var goodScheduled = regexp.MustCompile(`^scheduled(/[a-z0-9-]{1,32})?$`)

// FuzzScheduledShutdown feeds answers to Get(ScheduledShutdown), seeded
// with what systemd 252 answered (a poweroff scheduled, none, a reboot
// that fired, a poweroff not scheduled), through the decoder and parseSchedule: no panic, and a
// schedule is only ever Maintenance advice with a clean Event.
func FuzzScheduledShutdown(f *testing.F) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		f.Add(replyBytes(f, order, dbus.MakeVariant(st{"poweroff", 1796234406932978})))
		f.Add(replyBytes(f, order, dbus.MakeVariant(st{"", 1<<64 - 1})))
		f.Add(replyBytes(f, order, dbus.MakeVariant(st{"", 0})))
		f.Add(replyBytes(f, order, dbus.MakeVariant(st{"poweroff", 0})))
		f.Add(replyBytes(f, order, dbus.MakeVariant(st{"reboot", 1796230807236180})))
		f.Add(replyBytes(f, order, dbus.MakeVariant(st{"Power Off!", 1})))
		f.Add(replyBytes(f, order, dbus.MakeVariant([]any{"poweroff", uint64(1)})))
		f.Add(replyBytes(f, order, dbus.MakeVariant("poweroff")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := dbus.DecodeMessage(bytes.NewReader(data))
		if err != nil || len(msg.Body) != 1 {
			return
		}
		v, ok := msg.Body[0].(dbus.Variant)
		if !ok {
			return
		}
		s, err := parseSchedule(v.Value())
		if err != nil || s.typ == "" {
			return
		}
		n := s.notice(testNow)
		if n.Kind != termsig.Maintenance || !goodScheduled.MatchString(n.Event) {
			t.Fatalf("notice %v", n)
		}
	})
}

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want schedule
		ok   bool
	}{
		{[]any{"poweroff", uint64(1796234406932978)}, schedule{"poweroff", 1796234406932978}, true},
		{[]any{"", uint64(1<<64 - 1)}, schedule{}, true}, // none, as systemd 252 says
		{[]any{"", uint64(0)}, schedule{}, true},         // none, as older ones say
		{[]any{"poweroff", uint64(0)}, schedule{}, true}, // a shutdown not scheduled, as systemd 252 shows it
		{[]any{"../etc", uint64(5)}, schedule{unknownType, 5}, true},
		{[]any{"suspend", uint64(5)}, schedule{}, true}, // newer logind's delayed sleep: no shutdown
		{[]any{"dry-reboot", uint64(5)}, schedule{"dry-reboot", 5}, true},
		{[]any{"poweroff"}, schedule{}, false},
		{[]any{"poweroff", "soon"}, schedule{}, false},
		{[]any{uint64(5), "poweroff"}, schedule{}, false},
		{"poweroff", schedule{}, false},
		{nil, schedule{}, false},
	} {
		got, err := parseSchedule(tc.v)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("parseSchedule(%#v) = %+v, %v; want %+v, ok %v", tc.v, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		s     schedule
		event string
		at    time.Time
	}{
		{schedule{"reboot", 1796234406932978}, "scheduled/reboot", time.UnixMicro(1796234406932978)},
		{schedule{unknownType, 1796234406932978}, "scheduled", time.UnixMicro(1796234406932978)},
		{schedule{"poweroff", 1<<64 - 1}, "scheduled/poweroff", time.Time{}},
		{schedule{"poweroff", 1 << 63}, "scheduled/poweroff", time.Time{}},
	} {
		n := tc.s.notice(testNow)
		if n.Kind != termsig.Maintenance || n.Event != tc.event || !n.Deadline.Equal(tc.at) || !n.Observed.Equal(testNow) {
			t.Errorf("%+v.notice = %v (deadline %v)", tc.s, n, n.Deadline)
		}
	}
}
