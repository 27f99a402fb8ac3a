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

// TestLogindGoneShowsInStatus: logind leaving the bus (NameOwnerChanged to
// "") is reported with Run.Report while it lasts.
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

// TestLogindRestartDuringSetUpIsMetAfresh: a logind that restarts while the
// source sets up is met afresh: its delay, a lock from it.
func TestLogindRestartDuringSetUpIsMetAfresh(t *testing.T) {
	bus := startBus(t)
	fake2 := make(chan *logindtest.Logind, 1)
	newProgLogind(t, bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) },
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop == "InhibitDelayMaxUSec" && len(fake2) == 0 {
				if _, err := p.conn.ReleaseName(logindtest.BusName); err != nil {
					t.Error(err)
				}
				f, err := logindtest.New(bus.Address(), logindtest.Config{InhibitDelayMax: 120 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				fake2 <- f
			}
			p.defaultGet(prop, msg) // 5 s
		})
	e := &env{bus: bus, log: testlog.New()}
	e.run(t, logind.Config{})
	f := recv(t, fake2)
	t.Cleanup(func() { f.Close() })
	require.NoError(t, f.PrepareForShutdown("reboot"))
	nt := recv(t, e.n.C())
	assert.Equal(t, 120*time.Second, nt.Deadline.Sub(nt.Observed), "Deadline after logind restarted with InhibitDelayMaxSec=120 (lock from the new logind: %v; notice: %q)", len(f.Inhibitors()) > 0, nt.Reason)
}

// TestLogindGoneDuringSetUpShowsInStatus: logind leaving while the source
// sets up shows in Status.
func TestLogindGoneDuringSetUpShowsInStatus(t *testing.T) {
	bus := startBus(t)
	newProgLogind(t, bus.Address(),
		func(p *progLogind, n int, msg *dbus.Message) { p.replyLock(msg) },
		func(p *progLogind, prop string, msg *dbus.Message) {
			if prop == "InhibitDelayMaxUSec" {
				if _, err := p.conn.ReleaseName(logindtest.BusName); err != nil {
					t.Error(err)
				}
			}
			p.defaultGet(prop, msg)
		})
	log := testlog.New()
	n := termsig.Config{Logger: log.Logger()}.New(logind.New(logind.Config{Address: bus.Address(), Logger: log.Logger()}))
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Error(t, st.Err, "logind has left the bus, but Status says %v with no error", st.State)
}

// TestShutdownRightAfterLogindRestartIsHeardWhole: a reboot announced right
// after a new logind appears is a Reboot with the new logind's delay: the
// signals after its NameOwnerChanged wait until it is met.
func TestShutdownRightAfterLogindRestartIsHeardWhole(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.fake.Close())
	f, err := logindtest.New(e.bus.Address(), logindtest.Config{InhibitDelayMax: 120 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	require.NoError(t, f.PrepareForShutdown("reboot"))
	nt := recv(t, e.n.C())
	assert.Equal(t, termsig.Reboot, nt.Kind, "%v", nt)
	assert.Equal(t, "shutdown/reboot", nt.Event)
	assert.Equal(t, 120*time.Second, nt.Deadline.Sub(nt.Observed))
}

// TestLogindRestartDuringShutdownHearsTheNext: logind leaves the bus during
// a shutdown (it crashes, or is restarted) and a new logind, not shutting
// down, takes its place. The source starts afresh with it: a Cleared for
// the old shutdown, a lock from the new logind, and a notice for its
// shutdown.
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
// InhibitDelayMaxSec in a drop-in, which takes effect when logind restarts;
// the Deadline follows.
func TestDelayIsReadAgainWhenLogindRestarts(t *testing.T) {
	e := start(t, opts{fake: logindtest.Config{InhibitDelayMax: 5 * time.Second}})
	require.NoError(t, e.fake.Close())
	fake2 := startLogind(t, e.bus, logindtest.Config{InhibitDelayMax: 120 * time.Second})
	e.waitHeld(t, fake2, 1, 1)
	require.NoError(t, fake2.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	assert.Equal(t, 120*time.Second, nt.Deadline.Sub(nt.Observed), "Deadline after logind restarted with InhibitDelayMaxSec=120")
}
