package logind_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
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

// TestReleaseRacesCancelAndRelock: Release from another goroutine
// while logind cancels and the source relocks; no race, no lock left open
// after Stop, exactly one notice per shutdown and one Cleared per cancel.
func TestReleaseRacesCancelAndRelock(t *testing.T) {
	e := start(t, opts{})
	const rounds = 30
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range rounds {
		require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
		nt := recv(t, e.n.C())
		require.Equal(t, termsig.Terminate, nt.Kind, "round %d", i)
		wg.Add(2)
		go func() { defer wg.Done(); _ = e.n.Release(context.Background(), nt) }()
		go func() { defer wg.Done(); _ = e.n.Release(context.Background(), nt) }()
		require.NoError(t, e.fake.CancelShutdown("poweroff"))
		cl := recv(t, e.n.C())
		require.Equal(t, termsig.Cleared, cl.Kind, "round %d", i)
		require.Equal(t, nt.Event, cl.Event)
		wg.Wait()
		// One lock is held again, whichever won.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		require.NoError(t, e.fake.Wait(ctx, func(all []logindtest.Inhibitor) bool {
			h := 0
			for _, in := range all {
				if in.Released.IsZero() {
					h++
				}
			}
			return h == 1
		}), "round %d", i)
		cancel()
	}
	select {
	case nt := <-e.n.C():
		t.Fatalf("extra notice %v", nt)
	default:
	}
	e.n.Stop()
	e.waitHeld(t, e.fake, 0, len(e.fake.Inhibitors()))
}

// TestWatchAgainAfterStop: the same Source under a new Notifier
// after the first was stopped: a new lock, notices, Release; the first
// Notifier's notice releases nothing.
func TestWatchAgainAfterStop(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	old := recv(t, e.n.C())
	e.n.Stop()
	e.waitHeld(t, e.fake, 0, 1)
	require.NoError(t, e.n.Release(context.Background(), old), "Release after Stop")
	require.NoError(t, e.fake.CancelShutdown("poweroff"))

	n2 := termsig.Config{Logger: e.log.Logger()}.New(e.src)
	defer n2.Stop()
	e.waitHeld(t, e.fake, 1, 2)
	require.NoError(t, n2.Release(context.Background(), old))
	assert.Len(t, e.fake.Held(), 1, "a notice of the first Watch releases nothing")
	require.NoError(t, e.fake.PrepareForShutdown("reboot"))
	nt := recv(t, n2.C())
	assert.Equal(t, "shutdown/reboot", nt.Event)
	require.NoError(t, n2.Release(context.Background(), nt))
	e.waitHeld(t, e.fake, 0, 2)
}

// TestClearedIsHandedOverBeforeTheRelock: the Cleared of a cancelled
// shutdown is handed over before the new lock is taken, so a slow logind
// does not hold it back.
func TestClearedIsHandedOverBeforeTheRelock(t *testing.T) {
	bus := startBus(t)
	hang := make(chan struct{})
	defer close(hang)
	p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
		if n > 1 {
			<-hang
			return
		}
		p.replyLock(msg)
	}, nil)
	log := testlog.New()
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(logind.Config{Address: bus.Address(), Logger: log.Logger(), RequestTimeout: 3 * time.Second}))
	defer n.Stop()
	p.emit(true, "poweroff")
	nt := recv(t, n.C())
	require.NoError(t, n.Release(context.Background(), nt))
	p.emit(false, "poweroff")
	start := time.Now()
	cl := recv(t, n.C())
	assert.Equal(t, termsig.Cleared, cl.Kind)
	assert.Less(t, time.Since(start), time.Second, "the Cleared waited for the relock")
}

// TestCatchUpNoticeSaysTheLockIsHeld: a lock kept across a reconnection is
// still held when logind refuses a new one because a shutdown began
// meanwhile; the catch-up notice says so, and Release closes it.
func TestCatchUpNoticeSaysTheLockIsHeld(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.bus.Kill())
	e.log.WaitFor(t, logFailing, 1)
	require.NoError(t, e.bus.Start())
	newProgLogind(t, e.bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) { p.replyErr(msg, logindtest.ErrOperationInProgress) },
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop == "PreparingForShutdown" {
				p.reply(msg, dbus.MakeVariant(true))
				return
			}
			p.defaultGet(prop, msg)
		})
	nt := recv(t, e.n.C())
	require.Len(t, e.fake.Held(), 1, "the old lock is held")
	assert.NotContains(t, nt.Reason, "no delay lock", "the notice says no lock is held")
	require.NoError(t, e.n.Release(context.Background(), nt))
	e.waitHeld(t, e.fake, 0, 1)
}

// TestFakeHeldAfterClose: logindtest.Logind.Close drops the locks
// still held, as logind's exit does: Held lists none afterwards.
func TestFakeHeldAfterClose(t *testing.T) {
	e := start(t, opts{})
	require.Len(t, e.fake.Held(), 1)
	require.NoError(t, e.fake.Close())
	assert.Empty(t, e.fake.Held(), "locks still listed as held after Close")
}

// TestLockInFlightAtStopIsClosed: Stop while Inhibit's answer is on its
// way: whatever the timing, the lock logind handed out does not outlive
// Watch.
func TestLockInFlightAtStopIsClosed(t *testing.T) {
	bus := startBus(t)
	calls := make(chan *dbus.Message, 1)
	p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { calls <- msg }, nil)
	const trials = 400
	var locks []*os.File
	defer func() {
		for _, r := range locks {
			r.Close()
		}
	}()
	for i := range trials {
		src := logind.New(logind.Config{Address: bus.Address(), Logger: slog.New(slog.DiscardHandler)})
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler), ReadyTimeout: time.Millisecond}.New(src)
		msg := recv(t, calls)
		// Spread Stop over 0 to 400 µs after the answer is sent.
		r := p.replyLock(msg)
		locks = append(locks, r)
		<-time.After(time.Duration(i%40) * 10 * time.Microsecond)
		n.Stop()
	}
	var ends []<-chan struct{}
	for _, r := range locks {
		ends = append(ends, eof(r))
	}
	deadline := time.After(time.Second)
wait:
	for _, end := range ends {
		select {
		case <-end:
		case <-deadline:
			break wait
		}
	}
	leaked := 0
	for _, end := range ends {
		select {
		case <-end:
		default:
			leaked++
		}
	}
	if leaked > 0 {
		t.Errorf("%d of %d locks answered around Stop are still held after Stop returned (descriptors open here: %d)", leaked, trials, openFds(t))
	}
}

// TestInhibitThatNeverAnswersStillHears: an Inhibit that never answers (a
// stuck polkit) costs the lock, not the hearing: the shutdown is still a
// notice.
func TestInhibitThatNeverAnswersStillHears(t *testing.T) {
	bus := startBus(t)
	hold := make(chan struct{})
	fake, err := logindtest.New(bus.Address(), logindtest.Config{HoldInhibit: hold})
	require.NoError(t, err)
	t.Cleanup(func() { close(hold); fake.Close() })
	log := testlog.New()
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger(), RequestTimeout: 100 * time.Millisecond}, 10*time.Millisecond, 50*time.Millisecond)
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
	defer n.Stop()
	<-n.Ready()
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	select {
	case nt := <-n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
	case <-time.After(3 * time.Second):
		t.Fatalf("no notice 3 s after logind announced the shutdown (status: %+v); the source is deaf while Inhibit goes unanswered", n.Status()[0])
	}
}

// TestInhibitWrongAnswerStillHears: the same for an Inhibit that answers
// something other than a descriptor.
func TestInhibitWrongAnswerStillHears(t *testing.T) {
	bus := startBus(t)
	p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.reply(msg, "fd") }, nil)
	log := testlog.New()
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger()}, 10*time.Millisecond, 50*time.Millisecond)
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(c))
	defer n.Stop()
	<-n.Ready()
	p.emit(true, "poweroff")
	select {
	case nt := <-n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
	case <-time.After(3 * time.Second):
		t.Fatalf("no notice 3 s after logind announced the shutdown (status: %v)", n.Status()[0].Err)
	}
}

// TestRelockTimeoutRetriesAndTheLateLockIsClosed: after a cancelled
// shutdown whose lock was released, the relock call times out (logind is
// slow for a moment). The session starts again and takes a new lock, so the
// next shutdown is held; and logind's late answer, which carries a
// descriptor, finds the lock's own connection closed, so the bus closes the
// descriptor rather than leave a lock nobody can release.
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
	c := logind.Fast(logind.Config{Address: bus.Address(), Logger: log.Logger(), RequestTimeout: 200 * time.Millisecond}, time.Millisecond, 20*time.Millisecond)
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
