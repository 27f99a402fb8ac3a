package logind_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestLogindGoneShowsInStatus: logind leaving the bus (NameOwnerChanged
// to "") is reported with ReportError while it lasts. (Found by review:
// Status stayed healthy.)
func TestLogindGoneShowsInStatus(t *testing.T) {
	e := start(t, opts{})
	victim := sourceName(t, e.bus.Address(), e.fake)
	require.NoError(t, e.fake.Close())
	// Barrier: NameOwnerChanged reaches the source before the rogue's
	// signal, whose warning is logged once handled.
	forge(t, e.bus.Address(), victim)
	e.log.WaitFor(t, "logind: ignored shutdown signals that logind did not send", 1)
	st := e.n.Status()[0]
	assert.Error(t, st.Err, "logind has left the bus, but Status says %v with no error", st.State)
}

// TestStopIsPromptInMoreStates: Stop within 100 ms while the relock
// after a cancel hangs, while a Get hangs, and while the source dials a TCP
// address that does not answer.
func TestStopIsPromptInMoreStates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T) *termsig.Notifier
	}{
		{"relock-hangs", func(t *testing.T) *termsig.Notifier {
			bus := startBus(t)
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			relocking := make(chan struct{}, 1)
			p := newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) {
				if n > 1 {
					relocking <- struct{}{}
					<-hang
					return
				}
				p.replyLock(msg)
			}, nil)
			log := testlog.New()
			n := notifier(t, bus.Address(), log)
			<-n.Ready()
			p.emit(true, "poweroff")
			nt := recv(t, n.C())
			require.NoError(t, n.Release(context.Background(), nt))
			p.emit(false, "poweroff")
			recv(t, relocking)
			return n
		}},
		{"get-hangs", func(t *testing.T) *termsig.Notifier {
			bus := startBus(t)
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			asked := make(chan struct{}, 8)
			newProgLogind(t, bus.Address(), func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) },
				func(p *progLogind, prop string, msg *dbus.Message) {
					asked <- struct{}{}
					<-hang
				})
			n := notifier(t, bus.Address(), nil)
			recv(t, asked)
			return n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				n := tc.setUp(t)
				start := time.Now()
				n.Stop()
				return time.Since(start)
			})
		})
	}
}

// TestStopIsPromptWhileDialingTCP: a TCP listener whose accept queue
// is full drops SYNs, so the dial hangs; Stop does not wait for it (the
// source dials with the context). (Found by review: godbus's own dial
// ignored it.)
func TestStopIsPromptWhileDialingTCP(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	port := sa.(*syscall.SockaddrInet4).Port
	// Fill the accept queue.
	var fillers []net.Conn
	for range 4 {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err != nil {
			break
		}
		fillers = append(fillers, c)
	}
	defer func() {
		for _, c := range fillers {
			c.Close()
		}
	}()
	n := notifier(t, fmt.Sprintf("tcp:host=127.0.0.1,port=%d", port), nil)
	stopped := make(chan struct{})
	start := time.Now()
	go func() { n.Stop(); close(stopped) }()
	select {
	case <-stopped:
		assert.Less(t, time.Since(start), 100*time.Millisecond)
	case <-time.After(time.Second):
		t.Errorf("Stop still waiting after 1 s: the TCP dial ignores the context")
		syscall.Close(fd) // the dial then fails and Watch returns
		<-stopped
		t.Logf("Stop returned %v after it was called, once the listener closed", time.Since(start))
		return
	}
	syscall.Close(fd)
}

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

// TestWrongTypesFromLogind: Inhibit answering a string, or nothing,
// and properties of the wrong type: the source neither panics nor sends a
// notice, and reports the failure.
func TestWrongTypesFromLogind(t *testing.T) {
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

// TestClearedDoesNotWaitForTheRelock: the Cleared of a cancelled
// shutdown is handed over before the new lock is taken, so a slow logind
// does not hold it back. (Found by review: it waited up to CallTimeout.)
func TestClearedDoesNotWaitForTheRelock(t *testing.T) {
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
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(logind.Config{Address: bus.Address(), Logger: log.Logger(), CallTimeout: 3 * time.Second}))
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

// TestCatchUpNoticeSaysTheLockIsHeld: a lock kept across a
// reconnection is still held when logind refuses a new one because a
// shutdown began meanwhile; the catch-up notice says so, and Release
// closes it. (Found by review: it said "no delay lock".)
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
