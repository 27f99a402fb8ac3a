//go:build unix

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
)

// The job known when the notice came (A) ends while the cancel of its run
// is slow, and run.sh takes the next job (B) before it is stopped. B, the
// job run.sh is stopped in, is handed back (its run re-run), or else the
// registration kept so that the next start re-runs it. (Found by review:
// B was lost and the registration removed.)
func TestNextJobTakenDuringASlowCancelIsHandedBack(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "5s")
	r := w.onlineRunner("spot-1")
	runA := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "A", Jobs: []ghfake.JobSpec{{Name: "jobA", Duration: 1500 * time.Millisecond}}})
	w.runningOn(runA, r.ID)
	p.logLine("the runner runs") // A is known
	runB := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "B", Jobs: []ghfake.JobSpec{{Name: "jobB"}}})
	// The first cancel hangs (a slow API), for -api-timeout.
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, Hang: true})
	p.signal(syscall.SIGTERM)
	w.await("the cancel sent", func() bool { return len(w.calls("POST", "/cancel")) > 0 })
	// Meanwhile A ends by itself and run.sh takes B.
	p.stdout.await(t, func(line string) bool { return contains(line, "Running job: jobB") })
	p.exit()
	got, _ := w.gh.Run(runB)
	require.NotEmpty(t, got.AllJobs)
	assert.Equal(t, r.ID, got.AllJobs[0].RunnerID, "B ran on this runner")
	assert.Contains(t, got.AllJobs[0].Annotations, ghfake.ShutdownMessage, "B was failed by the stop")
	_, kept := w.gh.Runner(r.ID)
	assert.True(t, len(got.Reruns) > 0 || kept,
		"B, interrupted by the stop, is neither re-run (reruns %v) nor is the registration kept for the next start", got.Reruns)
}

// SIGHUP while an ephemeral runner runs its one job: once the job ends,
// run.sh exits and ghrunner ends as after any ephemeral job, exit 0.
// (Found by review: run.sh was restarted, found its registration gone,
// and ghrunner exited 1.)
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
	assert.Equal(t, exitOK, p.exit(), "an ephemeral runner's end after its job")
	assert.Len(t, p.runShPids(), 1, "run.sh of a spent ephemeral runner is not started again")
}

// A notice while starting (SIGTERM: -stop-timeout) starts the cleanup;
// a spot interruption with an earlier deadline then comes: the cleanup
// ends by that deadline. (Found by review: nobody read the notices then.)
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

// lingeringRunSh wraps run.sh so that it starts a background process, as
// a job's "daemon &" does: a non-interactive bash's background process
// ignores SIGINT. Its pid is printed as "LINGER PID".
func lingeringRunSh(t *testing.T, w *world) {
	t.Helper()
	real := filepath.Join(w.dir, "run-real.sh")
	require.NoError(t, os.Rename(filepath.Join(w.dir, "run.sh"), real))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "run.sh"), []byte(
		"#!/bin/bash\nsleep 300 </dev/null >/dev/null 2>&1 &\necho \"LINGER $!\"\nexec \""+real+"\" \"$@\"\n"), 0o755))
}

var lingerLine = regexp.MustCompile(`LINGER (\d+)`)

func lingerPids(p *proc) []int {
	var pids []int
	for _, m := range lingerLine.FindAllStringSubmatch(p.stdout.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		pids = append(pids, n)
	}
	return pids
}

// After a clean stop, no process is left in run.sh's process group, not
// even one that ignored SIGINT. (Found by review.)
func TestProcessLeftInRunShGroupDoesNotOutliveIt(t *testing.T) {
	w := newWorld(t, 0)
	lingeringRunSh(t, w)
	p, r, run := w.startWithJob()
	p.stdout.await(t, func(line string) bool { return contains(line, "LINGER ") })
	t.Cleanup(func() {
		for _, pid := range lingerPids(p) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	p.signal(syscall.SIGTERM)
	w.checkCleanedUp(p, r, run)
}

// The same on a SIGHUP restart: the old run.sh's group is gone when the
// new run.sh starts. (Found by review.)
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
	require.Equal(t, exitOK, p.exit())
}

// knownJobEndsBeforeTheCancel starts a job that ends by itself (failed or
// not) 1.5 s after it started, lets it be looked up, and sends SIGTERM
// while the cancel of its run hangs until the job has ended.
func knownJobEndsBeforeTheCancel(t *testing.T, fail bool) (*world, *proc, int64) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "4s")
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "quick", Duration: 1500 * time.Millisecond, Fail: fail}}})
	w.runningOn(run, r.ID)
	p.logLine("the runner runs")
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, Hang: true})
	p.signal(syscall.SIGTERM)
	w.await("the cancel sent", func() bool { return len(w.calls("POST", "/cancel")) > 0 })
	p.stdout.await(t, func(line string) bool { return contains(line, "Job quick completed with result") })
	w.await("the job done by itself", func() bool { got, _ := w.gh.Run(run); return got.Status == "completed" })
	return w, p, run
}

// The job known at the notice fails by itself before its run's cancel
// reaches GitHub (409): its run is not re-run. (Found by review.)
func TestKnownJobThatFailedByItselfBeforeTheCancelIsNotRerun(t *testing.T) {
	w, p, run := knownJobEndsBeforeTheCancel(t, true)
	p.exit()
	got, _ := w.gh.Run(run)
	require.NotEmpty(t, got.AllJobs)
	assert.Equal(t, "failure", got.AllJobs[0].Conclusion)
	assert.Empty(t, got.AllJobs[0].Annotations, "it failed by itself, not stopped by ghrunner")
	assert.Empty(t, got.Reruns, "a job that failed by itself is not re-run")
}

// The same job succeeds instead: nothing is left undone: exit 0. (Found
// by review: it asked to re-run a successful run and exited 3.)
func TestKnownJobThatSucceededBeforeTheCancelExits0(t *testing.T) {
	w, p, run := knownJobEndsBeforeTheCancel(t, false)
	assert.Equal(t, exitOK, p.exit(), "clean stop: %v", p.records("cleanup unfinished"))
	got, _ := w.gh.Run(run)
	assert.Equal(t, "success", got.Conclusion)
}
