//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
)

// stepRecord returns the first "step ..." log record whose step starts
// with prefix.
func stepRecord(p *proc, prefix string) map[string]any {
	for _, msg := range []string{"step failed", "step done"} {
		for _, rec := range p.records(msg) {
			if s, _ := rec["step"].(string); strings.HasPrefix(s, prefix) {
				return rec
			}
		}
	}
	return nil
}

// A rate limit whose end is past the step's end makes the step give up at
// once, and run.sh still gets its moment between SIGINT and SIGKILL.
// (Found by review: the drain's contexts had no Deadline, so the call
// slept until the kill time.)
func TestRateLimitPastTheEndDuringCleanupGivesUpAtOnce(t *testing.T) {
	w := newWorld(t, 0)
	p, _, run := w.startWithJob("-stop-timeout", "15s")
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, RateLimit: ghfake.RateLimit429, Wait: 10 * time.Minute})
	p.signal(syscall.SIGTERM)
	require.Equal(t, exitDeadline, p.exit(), "the cancel did fail")
	rec := stepRecord(p, "cancel run")
	require.NotNil(t, rec)
	took, _ := rec["took"].(float64)
	assert.Less(t, time.Duration(took), 2*time.Second, "cancel gave up at once: %v", rec["err"])
	assert.Contains(t, fmt.Sprint(rec["err"]), "would be after the deadline")
	assert.Empty(t, p.records("still running at its kill time"), "run.sh got time to stop after SIGINT")
	got, _ := w.gh.Run(run)
	assert.NotEmpty(t, got.Reruns, "the interrupted run is re-run")
}

// lateJobWorld starts ghrunner, sends SIGTERM while the first API call of
// the cleanup hangs, and meanwhile lets run.sh take a 1 ms job that ends by
// itself (failed or not) before run.sh is stopped.
func lateJobWorld(t *testing.T, fail bool) (*world, *proc, int64) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "3s")
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/actions/runners/", Times: 1, Hang: true})
	p.signal(syscall.SIGTERM)
	w.await("find's first call", func() bool { return len(w.calls("GET", "/actions/runners/"+itoa(r.ID))) > 0 })
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "quick", Duration: time.Millisecond, Fail: fail}}})
	w.await("the job done by itself", func() bool { got, _ := w.gh.Run(run); return got.Status == "completed" })
	p.stdout.await(t, func(line string) bool { return contains(line, "Job quick completed with result") })
	return w, p, run
}

// A job run.sh took after the notice and that failed by itself before
// run.sh was stopped is not re-run. (Found by review.)
func TestLateJobThatFailedByItselfIsNotRerun(t *testing.T) {
	w, p, run := lateJobWorld(t, true)
	p.exit()
	got, _ := w.gh.Run(run)
	require.NotEmpty(t, got.AllJobs)
	assert.Equal(t, "failure", got.AllJobs[0].Conclusion, "the job failed by itself")
	assert.Empty(t, got.AllJobs[0].Annotations, "not stopped by ghrunner")
	assert.Empty(t, got.Reruns, "a job that failed by itself is not re-run")
	assert.Empty(t, w.answered("POST", "/runs/"+itoa(run)+"/rerun-failed-jobs"))
}

// A job run.sh took after the notice and that succeeded before run.sh was
// stopped leaves nothing undone: exit 0. (Found by review: it was exit 3.)
func TestLateJobThatSucceededExits0(t *testing.T) {
	w, p, run := lateJobWorld(t, false)
	assert.Equal(t, exitOK, p.exit(), "clean stop")
	got, _ := w.gh.Run(run)
	assert.Equal(t, "success", got.Conclusion)
	assert.Empty(t, p.records("cleanup unfinished"))
}

// When finding the job fails for good (a single 403), the job run.sh was
// stopped in is looked for again once run.sh has stopped and re-run, or
// else the registration is kept so that the next start re-runs it.
// (Found by review: the registration was removed and the job lost.)
// startWithUnknownJob is startWithJob with the job's lookup at its start
// failing: f is injected first.
func (w *world) startWithUnknownJob(f ghfake.Fault) (*proc, ghfake.Runner, int64) {
	w.t.Helper()
	p := w.start()
	r := w.onlineRunner("spot-1")
	w.gh.Inject(f)
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
	w.runningOn(run, r.ID)
	p.logLine("cannot look up the job")
	return p, r, run
}

func TestJobNotFoundIsRecoveredOrItsRegistrationKept(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithUnknownJob(ghfake.Fault{Method: "GET", Path: "/actions/runs", Times: 2, Status: 403})
	p.signal(syscall.SIGTERM)
	require.Equal(t, exitOK, p.exit(), "the job was found after all")
	got, _ := w.gh.Run(run)
	assert.Equal(t, []string{"failed"}, got.Reruns, "the interrupted job is re-run")
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "its registration removed")
	p.logLine("the job run.sh was stopped in")
}

// When that search fails too, the registration is kept for the next
// start, which re-runs the job. (Found by review.)
func TestJobNeverFoundKeepsItsRegistrationForTheNextStart(t *testing.T) {
	w := newWorld(t, 0)
	p2, r2, run2 := w.startWithUnknownJob(ghfake.Fault{Method: "GET", Path: "/actions/runs", Status: 403})
	p2.signal(syscall.SIGTERM)
	require.Equal(t, exitDeadline, p2.exit())
	assert.Contains(t, p2.logLine("cleanup unfinished")["unfinished"], "kept, so that the next start")
	_, still := w.gh.Runner(r2.ID)
	require.True(t, still, "its registration is kept")
	w.gh.ClearFaults()
	p3 := w.start()
	p3.logLine("re-run requested")
	got, _ := w.gh.Run(run2)
	assert.Equal(t, []string{"failed"}, got.Reruns, "the next start re-runs the job")
	w.await("the stale registration removed", func() bool { _, still := w.gh.Runner(r2.ID); return !still })
	p3.signal(syscall.SIGTERM)
	require.Equal(t, exitOK, p3.exit())
}

// run.sh runs a job of a run older than the 100 newest in-progress runs:
// it is found on a later page and handed back. (Found by review: it was
// taken for none, and ghrunner exited 0 with the job lost.)
func TestBusyJobBeyondTheFirstPageOfRunsIsFound(t *testing.T) {
	w := newWorld(t, 0)
	old := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "old", Jobs: []ghfake.JobSpec{{Name: "x", Labels: []string{"spot"}}}})
	exe, err := os.Executable()
	require.NoError(t, err)
	dir2 := t.TempDir()
	require.NoError(t, ghfake.WriteRunnerDir(dir2, exe))
	w.start("-runner-dir", dir2, "-name", "helper") // takes the "a" jobs below
	var newer []int64
	for range 100 {
		newer = append(newer, w.gh.AddRun("acme/app", ghfake.RunSpec{Jobs: []ghfake.JobSpec{
			{Name: "a", Duration: time.Millisecond}, {Name: "b", Labels: []string{"nobody"}},
		}}))
	}
	w.await("100 newer runs in progress", func() bool {
		for _, id := range newer {
			if got, _ := w.gh.Run(id); got.Status != "in_progress" {
				return false
			}
		}
		return true
	})
	p := w.start("-labels", "spot")
	r := w.onlineRunner("spot-1")
	w.runningOn(old, r.ID)
	p.stdout.await(t, func(line string) bool { return contains(line, "Running job: x") })
	p.signal(syscall.SIGTERM)
	st := p.exit()
	got, _ := w.gh.Run(old)
	assert.Equal(t, exitOK, st)
	assert.True(t, got.CancelRequested, "the job was handed back: cancelled")
	assert.NotEmpty(t, got.Reruns, "the job was handed back: re-run")
}

// run.sh ended by itself (an ephemeral runner's one job) and ghrunner is
// removing the registration, with the API failing, when a spot
// interruption with a 5 s deadline comes: ghrunner exits before it.
// (Found by review: it retried for -stop-timeout.)
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

// config.sh has registered the runner (and written .runner) but has not
// exited when SIGTERM comes: the registration it made is removed.
// (Found by review: it was left.)
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
	assert.Equal(t, exitOK, st)
}
