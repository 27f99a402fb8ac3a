//go:build unix

package main

// Tests of the start: stale registrations of the same name, and notices
// while starting.

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/runner"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

func TestStaleOfflineRegistrationRemovedAndItsLostJobRerun(t *testing.T) {
	w := newWorld(t, 0)
	stale := w.gh.AddRunner("acme/app", ghfake.RunnerSpec{Name: "spot-1"})
	lostRun, _ := w.gh.AddLostJob("acme/app", stale, "spot-1")
	other := w.gh.AddRunner("acme/app", ghfake.RunnerSpec{Name: "spot-2"})
	p := w.start()
	r := w.onlineRunner("spot-1")
	assert.NotEqual(t, stale, r.ID, "a new registration")
	_, still := w.gh.Runner(stale)
	assert.False(t, still, "the stale registration is removed")
	_, kept := w.gh.Runner(other)
	assert.True(t, kept, "another name's registration is left alone")
	got, _ := w.gh.Run(lostRun)
	assert.Equal(t, []string{"failed"}, got.Reruns, "the job it lost is re-run")
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit())
}

func TestStaleRegistrationsJobThatFailedByItselfStaysFailed(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start()
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "test", Duration: time.Millisecond, Fail: true}}})
	w.await("the failing job", func() bool { got, _ := w.gh.Run(run); return got.Status == "completed" })
	// The machine dies: no cleanup.
	require.NoError(t, p.cmd.Process.Kill())
	<-p.done
	for _, pid := range p.runShPids() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	p2 := w.start()
	w.await("a new registration", func() bool {
		for _, r2 := range w.gh.Runners() {
			if r2.Name == "spot-1" && r2.Online && r2.ID != r.ID {
				return true
			}
		}
		return false
	})
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "the old registration (this directory's) is removed")
	got, _ := w.gh.Run(run)
	assert.Empty(t, got.Reruns, "a job that failed by itself is not re-run")
	p2.logLine("left no job to re-run")
	p2.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p2.exit())
}

// A machine that died mid-job leaves a registration GitHub still counts as
// busy: the next start force-cancels that run (a plain cancel would wait
// for the dead runner), re-runs it and removes the registration.
func TestStaleBusyRegistrationIsForceCancelledAndRerun(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithJob()
	require.NoError(t, p.cmd.Process.Kill()) // the machine dies: no cleanup
	<-p.done
	for _, pid := range p.runShPids() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	w.await("the dead runner offline but busy", func() bool { got, ok := w.gh.Runner(r.ID); return ok && !got.Online && got.Busy })
	p2 := w.start()
	p2.logLine("re-run requested")
	got, _ := w.gh.Run(run)
	assert.True(t, got.ForceCancelled)
	assert.Equal(t, []string{"failed"}, got.Reruns)
	w.await("the stale registration removed", func() bool { _, still := w.gh.Runner(r.ID); return !still })
	p2.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p2.exit())
}

func TestOnlineRunnerOfTheSameNameKeepsItsName(t *testing.T) {
	w := newWorld(t, 0)
	theirs := w.gh.AddRunner("acme/app", ghfake.RunnerSpec{Name: "spot-1", Online: true})
	p := w.start()
	require.Equal(t, supervisor.ExitFailed, p.exit())
	assert.Contains(t, p.logLine("cannot start")["err"], "give each machine its own -name")
	_, kept := w.gh.Runner(theirs)
	assert.True(t, kept)
}

func TestNoticeWhileStartingEndsQuickly(t *testing.T) {
	w := newWorld(t, 0)
	w.gh.Inject(ghfake.Fault{Path: "/registration-token", Hang: true})
	p := w.start()
	w.await("the registration token asked for", func() bool { return len(w.calls("POST", "/registration-token")) > 0 })
	start := time.Now()
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, w.gh.Runners(), "nothing registered")
	_, err := os.Stat(filepath.Join(w.dir, runner.RegistrationFile))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// config.sh has registered the runner (and written .runner) but has not
// exited when SIGTERM comes: the registration it made is removed.
func TestNoticeWhileConfigShFinishesRemovesTheRegistration(t *testing.T) {
	w := newWorld(t, 0)
	real := filepath.Join(w.dir, "config-real.sh")
	require.NoError(t, os.Rename(filepath.Join(w.dir, "config.sh"), real))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "config.sh"), []byte(
		"#!/bin/bash\n\""+real+"\" \"$@\" || exit $?\necho SETTINGS-SAVED\nexec sleep 60\n"), 0o755))
	p := w.start()
	p.stdout.await(t, func(line string) bool { return contains(line, "SETTINGS-SAVED") })
	require.Len(t, w.gh.Runners(), 1, "registered")
	p.signal(syscall.SIGTERM)
	st := p.exit()
	assert.Empty(t, w.gh.Runners(), "the registration made is removed")
	assert.Equal(t, supervisor.ExitOK, st)
}

// A notice while starting (SIGTERM: -stop-timeout) starts the cleanup;
// a spot interruption with an earlier deadline then comes: the cleanup
// ends by that deadline.
func TestEarlierDeadlineDuringTheStartsCleanupIsHeeded(t *testing.T) {
	w := newWorld(t, 0)
	real := filepath.Join(w.dir, "config-real.sh")
	require.NoError(t, os.Rename(filepath.Join(w.dir, "config.sh"), real))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "config.sh"), []byte(
		"#!/bin/bash\n\""+real+"\" \"$@\" || exit $?\necho SETTINGS-SAVED\nexec sleep 60\n"), 0o755))
	p := w.start("-stop-timeout", "25s", "-api-timeout", "1s")
	p.stdout.await(t, func(line string) bool { return contains(line, "SETTINGS-SAVED") })
	w.gh.Inject(ghfake.Fault{Method: "DELETE", Hang: true}) // the removal cannot finish
	p.signal(syscall.SIGTERM)
	p.logLine("imminent notice while starting")
	w.await("the removal tried", func() bool { return len(w.calls("DELETE", "")) > 0 })
	deadline := time.Now().Add(4 * time.Second)
	w.md.SetInterruption("terminate", deadline)
	select {
	case <-p.done:
		assert.True(t, time.Now().Before(deadline), "exited before the deadline")
	case <-time.After(time.Until(deadline) + 3*time.Second):
		t.Fatalf("ghrunner still runs 3s after the spot interruption's deadline")
	}
}
