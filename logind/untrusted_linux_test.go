package logind_test

import (
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/logind/logindtest"
)

// TestForgedSignalsWithFdsLeakNoDescriptors: any process on the system
// bus may send a signal to the source's connection (system.conf allows
// signals to anyone), and a signal may carry file descriptors. The
// source's listening connection does not take descriptors, so the bus
// refuses to pass them, and a rogue cannot fill the program's descriptor
// table. (Found by review: godbus took them in and nothing closed them.)
func TestForgedSignalsWithFdsLeakNoDescriptors(t *testing.T) {
	e := start(t, opts{})
	rogue, err := dbus.Connect(e.bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	victim := sourceName(t, e.bus.Address(), e.fake)

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	const flood = 200
	before := openFds(t)
	for range flood {
		msg := shutdownSignal(victim, "PrepareForShutdown", dbus.UnixFD(w.Fd()))
		require.NoError(t, rogue.Send(msg, nil).Err)
	}
	w.Close()
	// logind's signal comes after the rogue's on the source's connection:
	// once its notice is here, every forged signal has been read.
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	recv(t, e.n.C())
	after := openFds(t)
	// The write end was closed here; if the source had closed what it was
	// sent, the pipe would read EOF.
	select {
	case <-eof(r):
	case <-time.After(time.Second):
		t.Errorf("descriptors received with forged signals are never closed: %d open before the flood, %d after (%d signals)", before, after, flood)
	}
}

// TestFdsNestedInAVariantLeakNone: nor does a descriptor inside a
// variant reach the process (godbus would not even show it in the body).
func TestFdsNestedInAVariantLeakNone(t *testing.T) {
	e := start(t, opts{})
	rogue, err := dbus.Connect(e.bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	victim := sourceName(t, e.bus.Address(), e.fake)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	body := []any{dbus.MakeVariant(dbus.UnixFD(w.Fd()))}
	msg := &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:        dbus.MakeVariant(dbus.ObjectPath(logindtest.Path)),
			dbus.FieldInterface:   dbus.MakeVariant(logindtest.Interface),
			dbus.FieldMember:      dbus.MakeVariant("Anything"),
			dbus.FieldDestination: dbus.MakeVariant(victim),
			dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(body...)),
		},
		Body: body,
	}
	require.NoError(t, rogue.Send(msg, nil).Err)
	w.Close()
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	recv(t, e.n.C())
	select {
	case <-eof(r):
	case <-time.After(time.Second):
		t.Errorf("a descriptor in a variant of a forged signal is never closed")
	}
}

// TestFloodIsBounded: 5000 forged unicast signals (shutdown and
// others) cost no goroutines; the real shutdown after them is heard.
func TestFloodIsBounded(t *testing.T) {
	e := start(t, opts{})
	rogue, err := dbus.Connect(e.bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	victim := sourceName(t, e.bus.Address(), e.fake)
	base := runtime.NumGoroutine()
	peak := 0
	began := time.Now()
	for i := range 5000 {
		member := "PrepareForShutdown"
		if i%2 == 1 {
			member = "SomethingElse"
		}
		msg := shutdownSignal(victim, member, true)
		require.NoError(t, rogue.Send(msg, nil).Err)
		if i%500 == 0 {
			peak = max(peak, runtime.NumGoroutine())
		}
	}
	t.Logf("flood sent in %v", time.Since(began))
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	announced := time.Now()
	nt := recv(t, e.n.C())
	t.Logf("notice %v after the flood", time.Since(announced))
	require.Equal(t, "shutdown/poweroff", nt.Event)
	require.Less(t, peak-base, 20, "goroutines grew by %d during the flood", peak-base)
	require.Equal(t, 1, e.log.Count("logind: ignored shutdown signals that logind did not send"))
}

// TestBusRefusesDescriptorsToAConnectionWithoutThem: a connection made
// with dbus.NewConn over a plain net.Conn does not negotiate descriptor
// passing, and the daemon then refuses to deliver messages with
// descriptors to it, as the source's listening connection relies on.
func TestBusRefusesDescriptorsToAConnectionWithoutThem(t *testing.T) {
	bus := startBus(t)
	nc, err := net.Dial("unix", bus.Socket())
	require.NoError(t, err)
	victim, err := dbus.NewConn(nc)
	require.NoError(t, err)
	defer victim.Close()
	require.NoError(t, victim.Auth(nil))
	require.NoError(t, victim.Hello())
	require.False(t, victim.SupportsUnixFDs())
	rogue, err := dbus.Connect(bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	msg := &dbus.Message{
		Type: dbus.TypeSignal,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:        dbus.MakeVariant(dbus.ObjectPath(logindtest.Path)),
			dbus.FieldInterface:   dbus.MakeVariant(logindtest.Interface),
			dbus.FieldMember:      dbus.MakeVariant("PrepareForShutdown"),
			dbus.FieldDestination: dbus.MakeVariant(victim.Names()[0]),
			dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(dbus.UnixFD(0))),
		},
		Body: []any{dbus.UnixFD(w.Fd())},
	}
	require.NoError(t, rogue.Send(msg, nil).Err)
	w.Close()
	select {
	case <-eof(r):
	case <-time.After(wait):
		t.Fatal("descriptor still open")
	}
}
