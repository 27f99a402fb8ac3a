//go:build unix

package main

// Tests of SIGHUP restarts of run.sh, and ephemeral runners.

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

func TestSIGHUPRestartsRunShAfterItsJob(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithJob()
	p.signal(syscall.SIGHUP)
	p.logLine("restarting run.sh once its job ends")
	first := p.runShPids()
	require.Len(t, first, 1)
	assert.False(t, groupGone(first[0]), "run.sh is not stopped while its job runs")
	// The job ends (cancelled by a person, say).
	_, err := githubClient(w).Actions.CancelWorkflowRunByID(t.Context(), "acme", "app", run)
	requireAccepted(t, err)
	p.logLine("run.sh started again")
	w.await("the runner back online", func() bool { got, ok := w.gh.Runner(r.ID); return ok && got.Online })
	assert.Len(t, p.runShPids(), 2)
	assert.True(t, groupGone(first[0]), "the first run.sh is gone")
	assert.Empty(t, w.calls("DELETE", ""), "the registration is kept")
	// And the new run.sh takes jobs under the same registration.
	run2 := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "again"}}})
	w.runningOn(run2, r.ID)
	p.signal(syscall.SIGTERM)
	w.checkCleanedUp(p, r, run2)
}

func TestSIGHUPWhenIdleRestartsAtOnce(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start()
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	p.signal(syscall.SIGHUP)
	p.logLine("run.sh started again")
	assert.Len(t, p.runShPids(), 2)
	_, still := w.gh.Runner(r.ID)
	assert.True(t, still)
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit())
}

// The same on a SIGHUP restart: the old run.sh's group is gone when the
// new run.sh starts.
func TestRestartEndsTheOldRunShGroup(t *testing.T) {
	w := newWorld(t, 0)
	lingeringRunSh(t, w)
	p := w.start()
	w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	t.Cleanup(func() {
		for _, pid := range lingerPids(p) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	p.signal(syscall.SIGHUP)
	p.logLine("run.sh started again")
	first := p.runShPids()[0]
	assert.True(t, groupGone(first), "the first run.sh's process group is gone after the restart")
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit())
}

func TestEphemeralExitsAfterItsJob(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-ephemeral")
	r := w.onlineRunner("spot-1")
	assert.True(t, r.Ephemeral)
	w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "once", Duration: time.Millisecond}}})
	require.Equal(t, supervisor.ExitOK, p.exit())
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still)
}

// SIGHUP while an ephemeral runner runs its one job: once the job ends,
// run.sh exits and ghrunner ends as after any ephemeral job, exit 0.
func TestEphemeralSIGHUPDuringItsJobExits0(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-ephemeral")
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "once"}}})
	w.runningOn(run, r.ID)
	p.stdout.await(t, func(line string) bool { return contains(line, "Running job: once") })
	p.signal(syscall.SIGHUP)
	p.logLine("an ephemeral runner is not restarted")
	_, err := githubClient(w).Actions.CancelWorkflowRunByID(t.Context(), "acme", "app", run)
	requireAccepted(t, err)
	assert.Equal(t, supervisor.ExitOK, p.exit(), "an ephemeral runner's end after its job")
	assert.Len(t, p.runShPids(), 1, "run.sh of a spent ephemeral runner is not started again")
}

// run.sh ended by itself (an ephemeral runner's one job) and ghrunner is
// removing the registration, with the API failing, when a spot
// interruption with a 5 s deadline comes: ghrunner exits before it.
func TestNoticeWhileRemovingAfterRunShEndedIsHonoured(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-ephemeral", "-stop-timeout", "60s")
	w.onlineRunner("spot-1")
	w.gh.Inject(ghfake.Fault{Method: "DELETE", Status: 503})
	w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "once", Duration: time.Millisecond}}})
	p.logLine("the ephemeral runner has run its job")
	deadline := time.Now().Add(5 * time.Second)
	w.md.SetInterruption("terminate", deadline)
	select {
	case <-p.done:
		assert.True(t, time.Now().Before(deadline), "exited before the deadline")
	case <-time.After(time.Until(deadline) + 3*time.Second):
		t.Fatalf("ghrunner still runs %v after the notice's deadline", 3*time.Second)
	}
}
