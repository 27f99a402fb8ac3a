package logind_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// The tests of this file run the source against the real systemd-logind
// (logindtest.StartReal): Debian's systemd 252 in CI, which sends
// PrepareForShutdown only (PrepareForShutdownWithMetadata came in 255),
// so its shutdowns have Event "shutdown".

func waitJob(t *testing.T, sd *logindtest.Systemd, unit string) logindtest.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	job, err := sd.WaitJob(ctx, unit)
	require.NoError(t, err)
	return job
}

// The real logind gives the source its delay lock, announces a shutdown
// once (one notice), waits while the lock is held, and goes on (starts
// poweroff.target) once it is released.
func TestRealLogindHoldsTheShutdownUntilRelease(t *testing.T) {
	const delay = 3 * time.Second
	bus, real, sd := logindtest.StartReal(t, logindtest.RealConfig{InhibitDelayMax: delay})
	n, _ := watch(t, bus.Address(), logind.Config{Who: "termsig-test", Why: "handing back work"})
	asked := time.Now()
	require.NoError(t, real.PowerOff())
	nt := recv(t, n.C())
	t.Logf("notice %v after PowerOff was called", nt.Observed.Sub(asked).Round(time.Microsecond))
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, logind.EventShutdown, nt.Event)
	assert.Equal(t, delay, nt.Deadline.Sub(nt.Observed), "Deadline = Observed + InhibitDelayMaxSec")
	assert.Contains(t, nt.Reason, "delay lock held")
	assert.Empty(t, sd.Jobs(), "logind went on while the lock is held")

	released := time.Now()
	require.NoError(t, n.Release(context.Background(), nt))
	job := waitJob(t, sd, "poweroff.target")
	t.Logf("poweroff.target started %v after Release", job.At.Sub(released).Round(time.Microsecond))
	assert.Equal(t, "replace-irreversibly", job.Mode)
	select {
	case extra := <-n.C():
		t.Errorf("a second notice for the shutdown: %v", extra)
	default:
	}
}

// The real logind without the source's lock: with no delay lock held by
// anyone it starts poweroff.target at once, and the notice's Deadline is
// when it was seen; with another process's delay lock it waits, and the
// Deadline allows InhibitDelayMaxSec.
func TestRealLogindUnheldShutdownDeadline(t *testing.T) {
	const delay = 3 * time.Second
	for _, other := range []bool{false, true} {
		name := map[bool]string{false: "nobody holds", true: "another holds"}[other]
		t.Run(name, func(t *testing.T) {
			bus, real, sd := logindtest.StartReal(t, logindtest.RealConfig{InhibitDelayMax: delay})
			var lock interface{ Close() error }
			if other {
				f, err := logindtest.Inhibit(bus.Address(), "shutdown", "other", "its own reasons", "delay")
				require.NoError(t, err)
				defer f.Close()
				lock = f
			}
			n, _ := watch(t, bus.Address(), logind.Config{NoLock: true})
			require.NoError(t, real.PowerOff())
			nt := recv(t, n.C())
			assert.Equal(t, termsig.Terminate, nt.Kind)
			assert.Contains(t, nt.Reason, "no delay lock")
			if !other {
				assert.Equal(t, time.Duration(0), nt.Deadline.Sub(nt.Observed))
				job := waitJob(t, sd, "poweroff.target")
				t.Logf("poweroff.target started %v after the notice was seen", job.At.Sub(nt.Observed).Round(time.Microsecond))
				return
			}
			assert.Equal(t, delay, nt.Deadline.Sub(nt.Observed))
			assert.Empty(t, sd.Jobs(), "logind went on while another's lock is held")
			released := time.Now()
			require.NoError(t, lock.Close())
			job := waitJob(t, sd, "poweroff.target")
			t.Logf("poweroff.target started %v after the other lock was closed", job.At.Sub(released).Round(time.Microsecond))
		})
	}
}

// The source's lock is listed by the real logind as the operator sees it
// (systemd-inhibit --list), and a reboot is a notice too.
func TestRealLogindListsTheLock(t *testing.T) {
	bus, real, sd := logindtest.StartReal(t, logindtest.RealConfig{})
	n, _ := watch(t, bus.Address(), logind.Config{Who: "ci-runner", Why: "re-queueing the job"})
	inhs, err := logindtest.ListInhibitors(bus.Address())
	require.NoError(t, err)
	require.Len(t, inhs, 1)
	assert.Equal(t, logindtest.Inhibitor{What: "shutdown", Who: "ci-runner", Why: "re-queueing the job", Mode: "delay", UID: uint32(os.Getuid()), PID: uint32(os.Getpid())}, inhs[0])
	require.NoError(t, real.Reboot())
	nt := recv(t, n.C())
	assert.Equal(t, termsig.Terminate, nt.Kind, "systemd 252 does not say the type: the machine may not come back")
	n.Stop() // Stop releases the lock too
	waitJob(t, sd, "reboot.target")
}

// When the shutdown's job ends without the machine going down (systemd
// cancelled or failed it: JobRemoved), the real logind announces the end
// of the shutdown: the source sends Cleared and takes a new lock, which
// holds the next shutdown.
func TestRealLogindShutdownThatDidNotHappenClearsAndRelocks(t *testing.T) {
	bus, real, sd := logindtest.StartReal(t, logindtest.RealConfig{InhibitDelayMax: 3 * time.Second})
	n, _ := watch(t, bus.Address(), logind.Config{})
	require.NoError(t, real.PowerOff())
	nt := recv(t, n.C())
	require.NoError(t, n.Release(context.Background(), nt))
	job := waitJob(t, sd, "poweroff.target")
	require.NoError(t, sd.FinishJob(job, "canceled"))
	cl := recv(t, n.C())
	assert.Equal(t, termsig.Cleared, cl.Kind)
	assert.Equal(t, nt.Event, cl.Event)

	// The new lock is taken once the Cleared is handed over; the next
	// shutdown waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, real.WaitInhibitors(ctx, func(inhs []logindtest.Inhibitor) bool { return len(inhs) == 1 }))
	require.NoError(t, real.Reboot())
	nt = recv(t, n.C())
	assert.Contains(t, nt.Reason, "delay lock held")
	assert.Len(t, sd.Jobs(), 1, "logind went on while the new lock is held")
	require.NoError(t, n.Release(context.Background(), nt))
	waitJob(t, sd, "reboot.target")
}

// The real logind restarts (a crash, an upgrade): it restores the
// source's lock from its state; the source meets the new logind, takes a
// lock from it, and its next shutdown is heard and held.
func TestRealLogindRestart(t *testing.T) {
	bus, real, sd := logindtest.StartReal(t, logindtest.RealConfig{InhibitDelayMax: 3 * time.Second})
	n, log := watch(t, bus.Address(), logind.Config{})
	restarted := time.Now()
	require.NoError(t, real.Restart())
	log.WaitFor(t, logHealthy, 1) // logind was gone, and is met again
	t.Logf("the source met the new logind %v after Restart was called", time.Since(restarted).Round(time.Millisecond))
	require.NoError(t, real.PowerOff())
	nt := recv(t, n.C())
	assert.Contains(t, nt.Reason, "delay lock held")
	assert.Empty(t, sd.Jobs(), "logind went on while the lock is held")
	require.NoError(t, n.Release(context.Background(), nt))
	waitJob(t, sd, "poweroff.target")
}
