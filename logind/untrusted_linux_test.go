package logind_test

import (
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestFloodBeforeTheOwnerIsKnownKeepsLogindsSignals: logind's name is
// learnt before the lock is asked for, so a flood of forged signals while
// Inhibit is slow is dropped by the filter and cannot push logind's own out
// of the queue.
func TestFloodBeforeTheOwnerIsKnownKeepsLogindsSignals(t *testing.T) {
	bus := startBus(t)
	lockConn := make(chan string, 1)
	goAhead := make(chan struct{})
	var preparing atomic.Bool
	p := newProgLogind(t, bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) {
			sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
			lockConn <- sender
			<-goAhead
			// A shutdown began while polkit was asked: logind refuses.
			p.replyErr(msg, logindtest.ErrOperationInProgress)
		},
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop == "PreparingForShutdown" {
				p.reply(msg, dbus.MakeVariant(preparing.Load()))
				return
			}
			p.defaultGet(prop, msg)
		})
	log := testlog.New()
	c := logind.Config{Address: bus.Address(), Logger: log.Logger()}
	n := termsig.Config{Logger: log.Logger(), ReadyTimeout: time.Millisecond}.New(logind.New(c))
	defer n.Stop()
	lock := recv(t, lockConn)

	rogue, err := dbus.Connect(bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	var names []string
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	skip := []string{rogue.Names()[0], p.conn.Names()[0], lock}
	var victims []string
	for _, name := range names {
		if strings.HasPrefix(name, ":") && !slices.Contains(skip, name) {
			victims = append(victims, name)
		}
	}
	require.Len(t, victims, 1, "the source's listening connection")
	for range 1100 {
		require.NoError(t, rogue.Send(shutdownSignal(victims[0], "PrepareForShutdown", true), nil).Err)
	}
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	preparing.Store(true)
	p.emit(true, "reboot")
	close(goAhead)

	nt := recv(t, n.C())
	assert.Equal(t, termsig.Reboot, nt.Kind, "%v", nt)
	assert.Equal(t, "shutdown/reboot", nt.Event)
}

// TestForgedFdsToTheLockConnectionAreClosed: descriptors that some process
// sends the lock's own connection while Inhibit waits are closed as they
// come.
func TestForgedFdsToTheLockConnectionAreClosed(t *testing.T) {
	bus := startBus(t)
	lockConn := make(chan string, 1)
	goAhead := make(chan struct{})
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
		if n == 1 {
			sender, _ := msg.Headers[dbus.FieldSender].Value().(string)
			lockConn <- sender
			<-goAhead
		}
		p.replyLock(msg)
	}, nil)
	log := testlog.New()
	c := logind.Config{Address: bus.Address(), Logger: log.Logger()}
	n := termsig.Config{Logger: log.Logger(), ReadyTimeout: time.Millisecond}.New(logind.New(c))
	defer n.Stop()
	victim := recv(t, lockConn)

	rogue, err := dbus.Connect(bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	const planted = 50
	before := openFds(t)
	for range planted {
		msg := shutdownSignal(victim, "PrepareForShutdown", dbus.UnixFD(w.Fd()))
		require.NoError(t, rogue.Send(msg, nil).Err)
	}
	w.Close()
	var names []string // a round trip: the bus has passed them on
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	close(goAhead)
	<-n.Ready()
	select {
	case <-eof(r):
	case <-time.After(time.Second):
		t.Errorf("descriptors sent to the lock's connection are never closed: %d open before, %d after, with the lock's connection closed", before, openFds(t))
	}
}

// TestDescriptorsOfForgedSignalsAreClosed: any process on the system bus
// may send a signal to the source's connection (system.conf allows signals
// to anyone), and a signal may carry file descriptors. The source's
// listening connection does not take descriptors, so the bus refuses to
// pass them, and a rogue cannot fill the program's descriptor table.
func TestDescriptorsOfForgedSignalsAreClosed(t *testing.T) {
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

// TestDescriptorsNestedInAVariantAreClosed: nor does a descriptor inside a
// variant reach the process (godbus would not even show it in the body).
func TestDescriptorsNestedInAVariantAreClosed(t *testing.T) {
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
