package logind_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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

// env is a bus, a fake logind on it, and a Notifier running a logind
// source that talks to them.
type env struct {
	bus  *logindtest.Bus
	fake *logindtest.Logind
	src  *logind.Source
	n    *termsig.Notifier
	log  *testlog.Recorder
}

type opts struct {
	fake logindtest.Config
	src  logind.Config
}

func start(t *testing.T, o opts) *env {
	t.Helper()
	e := &env{bus: startBus(t), log: testlog.New()}
	e.fake = startLogind(t, e.bus, o.fake)
	e.run(t, o.src)
	return e
}

// run starts the Notifier and waits until the source has had its first
// look.
func (e *env) run(t *testing.T, c logind.Config) {
	t.Helper()
	c.Address = e.bus.Address()
	if c.Logger == nil {
		c.Logger = e.log.Logger()
	}
	e.src = logind.New(logind.Fast(c, time.Millisecond, 20*time.Millisecond))
	e.n = termsig.Config{Logger: e.log.Logger()}.New(e.src)
	t.Cleanup(e.n.Stop)
	select {
	case <-e.n.Ready():
	case <-time.After(wait):
		t.Fatal("source not ready")
	}
}

func (e *env) waitHeld(t *testing.T, fake *logindtest.Logind, held, total int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := fake.Wait(ctx, func(all []logindtest.Inhibitor) bool {
		n := 0
		for _, i := range all {
			if i.Released.IsZero() {
				n++
			}
		}
		return n == held && len(all) == total
	})
	require.NoError(t, err)
}

func TestLockIsTakenBeforeNewReturns(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{})
	// No wait for Ready: New itself waits for a source whose first look
	// is local.
	n := termsig.New(logind.New(logind.Config{Address: bus.Address(), Who: "ci-runner", Why: "re-queueing the job"}))
	defer n.Stop()
	held := fake.Held()
	require.Len(t, held, 1, "the delay lock is held when New returns")
	assert.Equal(t, "shutdown", held[0].What)
	assert.Equal(t, "delay", held[0].Mode)
	assert.Equal(t, "ci-runner", held[0].Who)
	assert.Equal(t, "re-queueing the job", held[0].Why)
	st := n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State)
	assert.NoError(t, st.Err)
}

func TestWhoDefaultsToTheProgram(t *testing.T) {
	e := start(t, opts{})
	held := e.fake.Held()
	require.Len(t, held, 1)
	assert.Equal(t, filepath.Base(os.Args[0]), held[0].Who)
	assert.NotEmpty(t, held[0].Why)
}

func TestShutdownTypes(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		old   bool // a logind without PrepareForShutdownWithMetadata
		kind  termsig.Kind
		event string
	}{
		{"poweroff", false, termsig.Terminate, "shutdown/poweroff"},
		{"halt", false, termsig.Terminate, "shutdown/halt"},
		{"reboot", false, termsig.Reboot, "shutdown/reboot"},
		{"kexec", false, termsig.Reboot, "shutdown/kexec"},
		{"soft-reboot", false, termsig.Reboot, "shutdown/soft-reboot"},
		{"future-thing", false, termsig.Terminate, "shutdown/future-thing"},
		{"Bad Type!", false, termsig.Terminate, "shutdown"},
		{"", false, termsig.Terminate, "shutdown"},
		{"reboot", true, termsig.Terminate, "shutdown"}, // type unknown: the machine may not come back
	} {
		t.Run(fmt.Sprintf("%s/old=%v", tc.typ, tc.old), func(t *testing.T) {
			e := start(t, opts{fake: logindtest.Config{NoMetadata: tc.old, InhibitDelayMax: 7 * time.Second}})
			before := time.Now()
			require.NoError(t, e.fake.PrepareForShutdown(tc.typ))
			nt := recv(t, e.n.C())
			assert.Equal(t, logind.Name, nt.Source)
			assert.Equal(t, tc.kind, nt.Kind)
			assert.Equal(t, tc.event, nt.Event)
			assert.False(t, nt.Observed.Before(before))
			assert.Equal(t, 7*time.Second, nt.Deadline.Sub(nt.Observed), "Deadline = Observed + InhibitDelayMaxUSec")
			assert.Contains(t, nt.Reason, "delay lock held")
		})
	}
}

// TestEachShutdownIsOneNotice: logind sends two signals per shutdown (and
// two when it is cancelled); the source sends one notice for each. The
// next notice after the shutdown's is the Cleared of the cancellation,
// not a second Terminate.
func TestEachShutdownIsOneNotice(t *testing.T) {
	e := start(t, opts{})
	for i := range 3 {
		require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
		require.NoError(t, e.fake.CancelShutdown("poweroff"))
		nt := recv(t, e.n.C())
		assert.Equal(t, termsig.Terminate, nt.Kind, "round %d", i)
		nt = recv(t, e.n.C())
		assert.Equal(t, termsig.Cleared, nt.Kind, "round %d", i)
		assert.Equal(t, "shutdown/poweroff", nt.Event)
	}
	assert.Equal(t, 6, e.n.Status()[0].Notices)
}

func TestReleaseClosesTheLock(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	require.Len(t, e.fake.Held(), 1, "held until released")
	require.NoError(t, e.n.Release(context.Background(), nt))
	e.waitHeld(t, e.fake, 0, 1)
	// Again: nothing left to release.
	require.NoError(t, e.n.Release(context.Background(), nt))
}

func TestStopClosesTheLock(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(fmt.Sprintf("during-shutdown=%v", during), func(t *testing.T) {
			e := start(t, opts{})
			if during {
				require.NoError(t, e.fake.PrepareForShutdown("reboot"))
				recv(t, e.n.C())
			}
			e.n.Stop()
			e.waitHeld(t, e.fake, 0, 1)
		})
	}
}

func TestCancelledShutdownClearsAndTakesANewLock(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.fake.PrepareForShutdown("reboot"))
	nt := recv(t, e.n.C())
	require.NoError(t, e.n.Release(context.Background(), nt))
	e.waitHeld(t, e.fake, 0, 1)

	require.NoError(t, e.fake.CancelShutdown("reboot"))
	cl := recv(t, e.n.C())
	assert.Equal(t, termsig.Cleared, cl.Kind)
	assert.Equal(t, nt.Event, cl.Event)
	e.waitHeld(t, e.fake, 1, 2)

	// The old notice releases nothing now: the new lock is for the next
	// shutdown.
	require.NoError(t, e.n.Release(context.Background(), nt))
	require.NoError(t, e.n.Release(context.Background(), cl))
	assert.Len(t, e.fake.Held(), 1)

	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	nt2 := recv(t, e.n.C())
	assert.Equal(t, "shutdown/poweroff", nt2.Event)
	require.NoError(t, e.n.Release(context.Background(), nt2))
	e.waitHeld(t, e.fake, 0, 2)
}

func TestCancelledWhileHeldKeepsTheLock(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	recv(t, e.n.C())
	require.NoError(t, e.fake.CancelShutdown("poweroff"))
	assert.Equal(t, termsig.Cleared, recv(t, e.n.C()).Kind)
	assert.Len(t, e.fake.Inhibitors(), 1, "the lock never released is still good")
	assert.Len(t, e.fake.Held(), 1)
}

func TestBusRestart(t *testing.T) {
	e := start(t, opts{})
	require.NoError(t, e.bus.Kill())
	e.log.WaitFor(t, logFailing, 1)
	st := e.n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State)
	assert.ErrorContains(t, st.Err, "logind:")

	require.NoError(t, e.bus.Start())
	fake2 := startLogind(t, e.bus, logindtest.Config{})
	e.log.WaitFor(t, logHealthy, 1)
	e.waitHeld(t, fake2, 1, 1)
	require.NoError(t, fake2.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	assert.Equal(t, "shutdown/poweroff", nt.Event)
	require.NoError(t, e.n.Release(context.Background(), nt))
	e.waitHeld(t, fake2, 0, 1)
}

// TestLogindRestart: logind leaves the bus and a new one comes; only the
// new one's signals count, and it gets a lock of its own.
func TestLogindRestart(t *testing.T) {
	e := start(t, opts{})
	old := e.fake.UniqueName()
	require.NoError(t, e.fake.Close())
	fake2 := startLogind(t, e.bus, logindtest.Config{})
	require.NotEqual(t, old, fake2.UniqueName())
	e.waitHeld(t, fake2, 1, 1)
	require.NoError(t, fake2.PrepareForShutdown("halt"))
	assert.Equal(t, "shutdown/halt", recv(t, e.n.C()).Event)
}

// TestForgedSignalsAreIgnored: any process on the bus may emit a signal
// that looks like logind's, broadcast or sent to this one; only logind's
// unique name is believed.
func TestForgedSignalsAreIgnored(t *testing.T) {
	e := start(t, opts{})
	rogue, err := dbus.Connect(e.bus.Address())
	require.NoError(t, err)
	defer rogue.Close()
	victim := sourceName(t, e.bus.Address(), e.fake)
	emit := func(dest string, name string, body ...any) {
		require.NoError(t, rogue.Send(shutdownSignal(dest, name, body...), nil).Err)
	}
	md := map[string]dbus.Variant{"type": dbus.MakeVariant("poweroff")}
	for _, dest := range []string{"", victim} {
		emit(dest, "PrepareForShutdownWithMetadata", true, md)
		emit(dest, "PrepareForShutdown", true)
	}
	// The rogue's messages reach the source before logind's (the bus
	// keeps each sender's order, and the source's connection is one), so
	// if they counted, the first notice would be theirs.
	require.NoError(t, e.fake.PrepareForShutdown("reboot"))
	nt := recv(t, e.n.C())
	assert.Equal(t, "shutdown/reboot", nt.Event)
	e.log.WaitFor(t, "logind: ignored shutdown signals that logind did not send", 1)
	assert.Equal(t, rogue.Names()[0], testlog.Attr(e.log.Records("logind: ignored shutdown signals that logind did not send")[0], "sender"))
}

func TestMalformedSignalFromLogindIsIgnored(t *testing.T) {
	e := start(t, opts{})
	// logind's connection itself, sending the wrong shapes.
	conn := e.fake.Conn()
	require.NoError(t, conn.Emit(logindtest.Path, logindtest.Interface+".PrepareForShutdown", "yes"))
	require.NoError(t, conn.Emit(logindtest.Path, logindtest.Interface+".PrepareForShutdownWithMetadata", true))
	require.NoError(t, conn.Emit(logindtest.Path, logindtest.Interface+".PrepareForShutdownWithMetadata", true, "poweroff"))
	require.NoError(t, conn.Emit("/org/freedesktop/login1/other", logindtest.Interface+".PrepareForShutdown", true))
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	assert.Equal(t, "shutdown/poweroff", nt.Event, "the first notice is the well-formed shutdown")
}

func TestShutdownAlreadyUnderWay(t *testing.T) {
	bus := startBus(t)
	fake := startLogind(t, bus, logindtest.Config{InhibitDelayMax: 3 * time.Second})
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	e := &env{bus: bus, fake: fake, log: testlog.New()}
	e.run(t, logind.Config{})
	nt := recv(t, e.n.C())
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, logind.EventShutdown, nt.Event)
	assert.Equal(t, time.Duration(0), nt.Deadline.Sub(nt.Observed), "when logind began to wait is not known: now")
	assert.Contains(t, nt.Reason, "already under way")
	assert.Empty(t, fake.Inhibitors(), "logind refuses a lock during a shutdown")

	require.NoError(t, fake.CancelShutdown("poweroff"))
	assert.Equal(t, termsig.Cleared, recv(t, e.n.C()).Kind)
	e.waitHeld(t, fake, 1, 1)
}

func TestLockRefusedStillHears(t *testing.T) {
	e := start(t, opts{fake: logindtest.Config{RefuseLocks: "org.freedesktop.DBus.Error.AccessDenied"}})
	st := e.n.Status()[0]
	assert.Equal(t, termsig.StateRunning, st.State)
	assert.ErrorContains(t, st.Err, "logind: no delay lock")
	assert.Equal(t, 1, e.log.Count("logind: no delay lock; shutdowns are heard but not held"))
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Contains(t, nt.Reason, "no delay lock")
	assert.NoError(t, e.n.Release(context.Background(), nt))
}

func TestNoLogindOnTheBus(t *testing.T) {
	bus := startBus(t)
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(logind.New(logind.Config{Address: bus.Address()}))
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Equal(t, termsig.StateUnavailable, st.State)
	assert.ErrorIs(t, st.Err, termsig.ErrUnavailable)
	assert.ErrorContains(t, st.Err, "not on the system bus")
}

func TestNoBus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no_bus")
	src := logind.New(logind.Config{Address: "unix:path=" + sock})
	err := src.Available()
	assert.ErrorIs(t, err, termsig.ErrUnavailable)
	assert.ErrorContains(t, err, sock)
	n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(src)
	defer n.Stop()
	<-n.Ready()
	st := n.Status()[0]
	assert.Equal(t, termsig.StateUnavailable, st.State)
	assert.ErrorIs(t, st.Err, termsig.ErrUnavailable)
}

func TestAddressFromEnvironment(t *testing.T) {
	bus := startBus(t)
	startLogind(t, bus, logindtest.Config{})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address())
	n := termsig.New(logind.New(logind.Config{}))
	defer n.Stop()
	assert.NoError(t, n.Status()[0].Err)
	assert.Equal(t, termsig.StateRunning, n.Status()[0].State)
}

func TestBadAddress(t *testing.T) {
	for _, addr := range []string{"/run/dbus/system_bus_socket", "unix:path", "unix:=x", "unix:path=%zz"} {
		src := logind.New(logind.Config{Address: addr})
		err := src.Available()
		require.Error(t, err, addr)
		assert.NotErrorIs(t, err, termsig.ErrUnavailable, addr)
		assert.ErrorContains(t, err, "Config.Address", addr)
	}
}

func TestReleaseOfAnotherSourcesNotice(t *testing.T) {
	src := logind.New(logind.Config{})
	assert.Error(t, src.Release(context.Background(), termsig.Notice{Source: "imds", Kind: termsig.Terminate}))
	assert.NoError(t, src.Release(context.Background(), termsig.Notice{Source: logind.Name, Kind: termsig.Terminate}), "not watching: nothing held")
}

// TestWatchedTwiceAtOnceFails: a second Notifier of the same Source
// fails it there, and leaves the first one's lock alone.
func TestWatchedTwiceAtOnceFails(t *testing.T) {
	e := start(t, opts{})
	n2 := termsig.Config{Logger: e.log.Logger()}.New(e.src)
	defer n2.Stop()
	<-n2.Ready()
	st := n2.Status()[0]
	assert.Equal(t, termsig.StateFailed, st.State)
	assert.ErrorContains(t, st.Err, "two Notifiers")
	assert.Len(t, e.fake.Held(), 1, "the first Notifier's lock is held")
}

// TestChildrenDoNotHoldTheLock: the lock's descriptor is close-on-exec, so
// a child started while it is held (a job, a hook) does not keep the
// shutdown waiting after Release.
func TestChildrenDoNotHoldTheLock(t *testing.T) {
	e := start(t, opts{})
	child := exec.Command("sleep", "1000")
	require.NoError(t, child.Start())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
	nt := recv(t, e.n.C())
	require.NoError(t, e.n.Release(context.Background(), nt))
	e.waitHeld(t, e.fake, 0, 1)
}

// TestNoLock: a source that only listens takes no lock, hears the
// shutdown, and its Release does nothing.
func TestNoLock(t *testing.T) {
	e := start(t, opts{src: logind.Config{NoLock: true}})
	assert.Empty(t, e.fake.Inhibitors())
	assert.NoError(t, e.n.Status()[0].Err)
	require.NoError(t, e.fake.PrepareForShutdown("reboot"))
	nt := recv(t, e.n.C())
	assert.Equal(t, termsig.Reboot, nt.Kind)
	assert.Contains(t, nt.Reason, "no delay lock")
	assert.NoError(t, e.n.Release(context.Background(), nt))
	require.NoError(t, e.fake.CancelShutdown("reboot"))
	assert.Equal(t, termsig.Cleared, recv(t, e.n.C()).Kind)
	assert.Empty(t, e.fake.Inhibitors(), "no lock after the cancel either")
}
