package logind_test

import (
	"context"
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

// TestNoticeWaitingForConsumerSurvivesTheBusDying: a shutdown notice
// that waits for a slow consumer is handed over while the source backs
// off after the bus went away (at the end of a shutdown it never comes
// back). (Found by review: only listen sent the pending notices.)
func TestNoticeWaitingForConsumerSurvivesTheBusDying(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	log := testlog.New()
	src := logind.New(logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, time.Millisecond, 20*time.Millisecond))
	n := termsig.Config{Logger: log.Logger(), Buffer: 1}.New(src)
	defer n.Stop()
	// N1 fills C, its Cleared waits in the Notifier's forwarder, N2 waits
	// in the source.
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

// TestLogindRestartDuringShutdownHearsTheNext: logind leaves the bus
// during a shutdown (it crashes, or is restarted) and a new logind, not
// shutting down, takes its place. The source starts afresh with it: a
// Cleared for the old shutdown, a lock from the new logind, and a notice
// for its shutdown. (Found by review: the new logind's shutdown was not
// heard at all.)
func TestLogindRestartDuringShutdownHearsTheNext(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	require.NoError(t, e.n.Release(context.Background(), nt))
	require.NoError(t, e.fake.Close())
	fake2 := startLogind(t, e.bus, logindtest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	assert.NoError(t, fake2.Wait(ctx, func(all []logindtest.Inhibitor) bool { return len(all) == 1 }),
		"the new logind gets a lock")
	require.NoError(t, fake2.PrepareForShutdown("reboot"))
	var got []termsig.Notice
	for {
		select {
		case nt := <-e.n.C():
			got = append(got, nt)
			if nt.Event == "shutdown/reboot" {
				return
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("no notice for the new logind's shutdown; got %v", got)
		}
	}
}

// TestDelayIsReadAgainWhenLogindRestarts: an operator raises
// InhibitDelayMaxSec in a drop-in, which takes effect when logind
// restarts; the Deadline follows. (Found by review: it kept the old one.)
func TestDelayIsReadAgainWhenLogindRestarts(t *testing.T) {
	e := start(t, opts{fake: logindtest.Config{InhibitDelayMax: 5 * time.Second}})
	require.NoError(t, e.fake.Close())
	fake2 := startLogind(t, e.bus, logindtest.Config{InhibitDelayMax: 120 * time.Second})
	e.waitHeld(t, fake2, 1, 1)
	require.NoError(t, fake2.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	assert.Equal(t, 120*time.Second, nt.Deadline.Sub(nt.Observed), "Deadline after logind restarted with InhibitDelayMaxSec=120")
}

// TestUnreadablePreparingForShutdownStillListens: a logind whose
// PreparingForShutdown cannot be read is taken to be not shutting down,
// and the source listens: the shutdown's signal is heard, and the lock it
// took is released with the notice. (Found by review: setUp failed after
// taking a lock, so each retry held a lock while nothing listened.)
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

type lockEnd struct {
	n   int
	eof <-chan struct{}
}

// TestRelockTimeoutRetriesAndTheLateLockIsClosed: after a cancelled
// shutdown whose lock was released, the relock call times out (logind is
// slow for a moment). The session starts again and takes a new lock, so
// the next shutdown is held; and logind's late answer, which carries a
// descriptor, finds the lock's own connection closed, so the bus closes
// the descriptor rather than leave a lock nobody can release. (Found by
// review: the relock was not retried, and godbus dropped the late reply
// without closing its descriptor.)
func TestRelockTimeoutRetriesAndTheLateLockIsClosed(t *testing.T) {
	bus := startBus(t)
	slow := make(chan struct{})
	lateLock := make(chan *lockEnd, 1)
	p := newProgLogind(t, bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) {
			if n == 2 {
				<-slow // answered after the caller's timeout
				r := p.replyLock(msg)
				lateLock <- &lockEnd{n: n, eof: eof(r)}
				return
			}
			p.replyLock(msg)
		},
		nil)
	log := testlog.New()
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger(), CallTimeout: 200 * time.Millisecond}, time.Millisecond, 20*time.Millisecond)
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
	defer n.Stop()
	p.emit(true, "poweroff")
	nt := recv(t, n.C())
	require.NoError(t, n.Release(context.Background(), nt))
	p.emit(false, "poweroff")
	assert.Equal(t, termsig.Cleared, recv(t, n.C()).Kind)
	log.WaitFor(t, logFailing, 1) // the relock timed out: the session starts again
	close(slow)
	late := recv(t, lateLock)
	log.WaitFor(t, logHealthy, 1) // reconnected, with a new lock

	p.emit(true, "reboot")
	nt2 := recv(t, n.C())
	assert.Contains(t, nt2.Reason, "delay lock held", "the next shutdown is held")
	require.NoError(t, n.Release(context.Background(), nt2))
	n.Stop()
	select {
	case <-late.eof:
	case <-time.After(time.Second):
		t.Errorf("the late lock is never closed, not by Release nor by Stop: logind waits InhibitDelayMaxSec")
	}
}

// TestUnderWayNoticeIsOnCAtReady: Notifier.Ready promises that "what the
// first looks found is on C by the time Ready is closed"; a program checks
// C after Ready before it takes its first job. The notice of a shutdown
// already under way is there. (Found by review: it was sent after Ready.)
func TestUnderWayNoticeIsOnCAtReady(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	misses := 0
	const trials = 100
	for range trials {
		n := termsig.Config{Logger: testlog.New().Logger()}.New(logind.New(logind.Config{Address: bus.Address()}))
		<-n.Ready()
		if len(n.C()) == 0 {
			misses++
		}
		n.Stop()
	}
	assert.Zero(t, misses, "Ready closed before the under-way notice was on C in %d of %d runs", misses, trials)
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
