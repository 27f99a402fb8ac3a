package logind_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
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

// TestBusKilledDuringInhibitAndGet: the bus dies while Inhibit, and
// then while a Get, is in flight; the source recovers on a new bus and a
// new logind, with one lock, and hears the next shutdown.
func TestBusKilledDuringInhibitAndGet(t *testing.T) {
	for _, stage := range []string{"inhibit", "get"} {
		t.Run(stage, func(t *testing.T) {
			bus := startBus(t)
			inFlight := make(chan struct{}, 8)
			hang := make(chan struct{})
			defer close(hang)
			newProgLogind(t, bus.Address(),
				func(p *progLogind, n int, msg *dbus.Message) {
					if stage == "inhibit" {
						inFlight <- struct{}{}
						<-hang
						return
					}
					p.replyLock(msg)
				},
				func(p *progLogind, prop string, msg *dbus.Message) {
					if stage == "get" {
						inFlight <- struct{}{}
						<-hang
						return
					}
					p.defaultGet(prop, msg)
				})
			log := testlog.New()
			c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond)
			n := termsig.Config{Logger: log.Logger(), ReadyTimeout: 10 * time.Millisecond}.New(logind.New(c))
			defer n.Stop()
			recv(t, inFlight)
			require.NoError(t, bus.Kill())
			log.WaitFor(t, logFailing, 1)
			require.NoError(t, bus.Start())
			fake := startLogind(t, bus, logindtest.Config{})
			log.WaitFor(t, logHealthy, 1)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }))
			require.NoError(t, fake.PrepareForShutdown("poweroff"))
			nt := recv(t, n.C())
			require.NoError(t, n.Release(context.Background(), nt))
			require.NoError(t, fake.Wait(ctx, func(all []logindtest.Inhibitor) bool { return !all[0].Released.IsZero() }))
		})
	}
}

// TestWrongTypesFromLogindAreIgnored: Inhibit answering a string, or nothing,
// and properties of the wrong type: the source neither panics nor sends a
// notice, and reports the failure.
func TestWrongTypesFromLogindAreIgnored(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inhibit func(p *progLogind, msg *dbus.Message)
		get     func(p *progLogind, prop string, msg *dbus.Message)
	}{
		{"inhibit-string", func(p *progLogind, msg *dbus.Message) { p.reply(msg, "fd") }, nil},
		{"inhibit-empty", func(p *progLogind, msg *dbus.Message) { p.reply(msg) }, nil},
		{"props-wrong", func(p *progLogind, msg *dbus.Message) { p.replyLock(msg) }, func(p *progLogind, prop string, msg *dbus.Message) {
			p.reply(msg, dbus.MakeVariant("yes"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus := startBus(t)
			newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { tc.inhibit(p, msg) }, tc.get)
			log := testlog.New()
			c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond)
			n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
			defer n.Stop()
			<-n.Ready()
			st := n.Status()[0]
			t.Logf("%v %v", st.State, st.Err)
			select {
			case nt := <-n.C():
				t.Errorf("notice %v", nt)
			default:
			}
		})
	}
}

// TestLogindGoneAfterAnsweringIsTransient: a logind that granted a lock and
// then left is a transient failure, not "unavailable".
func TestLogindGoneAfterAnsweringIsTransient(t *testing.T) {
	bus := startBus(t)
	newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
		if n == 1 {
			if _, err := p.conn.ReleaseName(logindtest.BusName); err != nil {
				t.Error(err)
			}
		}
		p.replyLock(msg)
	}, nil)
	log := testlog.New()
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond)))
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State, "retired after logind granted a lock: %v", st.Err)
}

// TestRootWithBusDownAtStartIsTransient: a bus whose socket exists but
// refuses at start is retried, not taken for "no system bus" because
// another entry of the address is missing.
func TestRootWithBusDownAtStartIsTransient(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run", "dbus")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "system_bus_socket"), Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	ln.Close() // the socket stays; connecting to it is refused
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "")
	log := testlog.New()
	src := logind.New(logind.Fast(logind.Config{Root: root, Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond))
	require.NoError(t, src.Available())
	n := termsig.Config{Logger: log.Logger()}.New(src)
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State, "retired while the bus's socket exists: %v", st.Err)
}

// TestNoticeWaitingForConsumerSurvivesTheBusDying: a shutdown notice that
// waits for a slow consumer is handed over while the source backs off after
// the bus went away (at the end of a shutdown it never comes back).
func TestNoticeWaitingForConsumerSurvivesTheBusDying(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	log := testlog.New()
	src := logind.New(logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond))
	n := termsig.Config{Logger: log.Logger(), Buffer: 1}.New(src)
	defer n.Stop()
	// N1 fills C, its Cleared waits in Run.Send, N2 waits behind it in
	// the source, which reads signals and sees the bus go meanwhile.
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	require.NoError(t, fake.CancelShutdown("poweroff"))
	require.NoError(t, fake.PrepareForShutdown("reboot"))
	// A barrier: the fake's round trip to the daemon puts its reboot
	// signals in the source's queue first; a rogue's forged signal to the
	// source comes after them, and its warning is logged once the batch
	// that holds it was handled, N2 included.
	var names []string
	require.NoError(t, fake.Conn().BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
	forge(t, bus.Address(), sourceName(t, bus.Address(), fake))
	log.WaitFor(t, "logind: ignored shutdown signals that logind did not send", 1)
	require.NoError(t, bus.Kill())
	log.WaitFor(t, logFailing, 1)

	got := []termsig.Notice{recv(t, n.C()), recv(t, n.C())}
	select {
	case nt := <-n.C():
		got = append(got, nt)
	case <-time.After(wait):
		t.Fatalf("the second shutdown's notice never arrives while the bus is down: got %v", got)
	}
	assert.Equal(t, "shutdown/reboot", got[2].Event)
}

// TestUnreadablePreparingForShutdownStillListens: a logind whose
// PreparingForShutdown cannot be read is taken to be not shutting down, and
// the source listens: the shutdown's signal is heard, and the lock it took
// is released with the notice.
func TestUnreadablePreparingForShutdownStillListens(t *testing.T) {
	bus := startBus(t)
	locks := make(chan *lockEnd, 64)
	p := newProgLogind(t, bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) {
			r := p.replyLock(msg)
			locks <- &lockEnd{n: n, eof: eof(r)}
		},
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop == "PreparingForShutdown" {
				p.replyErr(msg, "org.freedesktop.DBus.Error.UnknownProperty")
				return
			}
			p.defaultGet(prop, msg)
		})
	log := testlog.New()
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, 20*time.Millisecond, 20*time.Millisecond)
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
	defer n.Stop()
	lock := recv(t, locks)
	p.emit(true, "poweroff")
	nt := recv(t, n.C())
	assert.Contains(t, nt.Reason, "delay lock held")
	require.NoError(t, n.Release(context.Background(), nt))
	recv(t, lock.eof)
	assert.Zero(t, log.Count(logFailing), "nothing failed")
	select {
	case l := <-locks:
		t.Errorf("a second lock (%d) was taken", l.n)
	default:
	}
}

// forge sends victim a unicast PrepareForShutdown(true) from a connection
// that is not logind.
func forge(t *testing.T, addr, victim string) {
	t.Helper()
	rogue, err := dbus.Connect(addr)
	require.NoError(t, err)
	defer rogue.Close()
	msg := shutdownSignal(victim, "PrepareForShutdown", true)
	require.NoError(t, rogue.Send(msg, nil).Err)
	var names []string
	require.NoError(t, rogue.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names))
}
