//go:build unix

package main

// Tests of which jobs the cleanup hands back (cancels and re-runs), when
// jobs end, start or are found late around the notice.

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

// A job run.sh took after the notice and that failed by itself before
// run.sh was stopped is not re-run.
func TestLateJobThatFailedByItselfStaysFailed(t *testing.T) {
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
// stopped leaves nothing undone: exit 0.
func TestLateJobThatSucceededExits0(t *testing.T) {
	w, p, run := lateJobWorld(t, false)
	assert.Equal(t, supervisor.ExitOK, p.exit(), "clean stop")
	got, _ := w.gh.Run(run)
	assert.Equal(t, "success", got.Conclusion)
	assert.Empty(t, p.records("cleanup unfinished"))
}

// When finding the job fails for good (a 403 twice), the job run.sh was
// stopped in is looked for again once run.sh has stopped and re-run, or
// else the registration is kept so that the next start re-runs it.
func TestJobNotFoundAtTheNoticeIsFoundOnceRunShStopped(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithUnknownJob(ghfake.Fault{Method: "GET", Path: "/actions/runs", Times: 2, Status: 403})
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitOK, p.exit(), "the job was found after all")
	got, _ := w.gh.Run(run)
	assert.Equal(t, []string{"failed"}, got.Reruns, "the interrupted job is re-run")
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "its registration removed")
	p.logLine("the job run.sh was stopped in")
}

// When that search fails too, the registration is kept for the next
// start, which re-runs the job.
func TestJobNeverFoundKeepsItsRegistrationForTheNextStart(t *testing.T) {
	w := newWorld(t, 0)
	p2, r2, run2 := w.startWithUnknownJob(ghfake.Fault{Method: "GET", Path: "/actions/runs", Status: 403})
	p2.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitDeadline, p2.exit())
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
	require.Equal(t, supervisor.ExitOK, p3.exit())
}

// run.sh runs a job of a run older than the 100 newest in-progress runs:
// it is found on a later page and handed back.
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
	assert.Equal(t, supervisor.ExitOK, st)
	assert.True(t, got.CancelRequested, "the job was handed back: cancelled")
	assert.NotEmpty(t, got.Reruns, "the job was handed back: re-run")
}

// The job known when the notice came (A) ends while the cancel of its run
// is slow, and run.sh takes the next job (B) before it is stopped. B, the
// job run.sh is stopped in, is handed back (its run re-run), or else the
// registration kept so that the next start re-runs it.
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

// The job known at the notice fails by itself before its run's cancel
// reaches GitHub (409): its run is not re-run.
func TestKnownJobThatFailedByItselfBeforeTheCancelStaysFailed(t *testing.T) {
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
	assert.Equal(t, supervisor.ExitOK, p.exit(), "clean stop: %v", p.records("cleanup unfinished"))
	got, _ := w.gh.Run(run)
	assert.Equal(t, "success", got.Conclusion)
}

// The run of the job known at the notice has a second job, queued for
// another runner (a "needs:" or a matrix job waiting for a runner). The
// known job ends by itself while the cancel of its run is slow; the
// cancel then reaches GitHub and cancels the queued job: the run is re-run
// (failed jobs only, so the finished job is not run again). (Found by
// review: the cancelled job was lost.)
func TestCancelledSiblingOfAJobThatEndedByItselfIsHandedBack(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "4s")
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{
		{Name: "quick", Duration: 1500 * time.Millisecond},
		{Name: "deploy", Labels: []string{"self-hosted", "gpu"}}, // no runner here has gpu
	}})
	w.runningOn(run, r.ID)
	p.logLine("the runner runs")
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, Hang: true})
	p.signal(syscall.SIGTERM)
	w.await("the cancel sent", func() bool { return len(w.calls("POST", "/cancel")) > 0 })
	p.stdout.await(t, func(line string) bool { return contains(line, "Job quick completed with result: Succeeded") })
	code := p.exit()
	got, _ := w.gh.Run(run)
	var deploy ghfake.Job
	for _, j := range got.AllJobs {
		if j.Name == "deploy" && j.Attempt == 1 {
			deploy = j
		}
	}
	require.True(t, got.CancelRequested, "ghrunner cancelled the run")
	assert.Equal(t, "cancelled", deploy.Conclusion, "ghrunner's cancel cancelled the queued job")
	assert.Equal(t, []string{"failed"}, got.Reruns, "the job ghrunner cancelled is handed back (exit %d)", code)
	assert.Equal(t, supervisor.ExitOK, code)
}

// The runner takes a job just before the notice, and ghrunner has not yet
// read the listener's "Running job" line when it stops run.sh; the search
// for the runner's job fails (an error answer). run.sh's output,
// read to its end once it exited, says it was stopped in that job: the
// job is handed back, or the registration kept for the next start.
func TestJobWhoseLineIsReadAfterTheStopIsHandedBack(t *testing.T) {
	w := newWorld(t, 0)
	running := slowRunningLineRunSh(t, w, "late", 3)
	p := w.start()
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "late"}}})
	w.runningOn(run, r.ID)
	select {
	case <-running: // the listener is in the job: GitHub's in_progress can come first
	case <-time.After(wait):
		t.Fatal("the listener never printed its Running job line")
	}
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/actions/runners/", Times: 1, Status: 400})
	p.signal(syscall.SIGTERM)
	code := p.exit()
	require.Contains(t, p.stdout.String(), "Job late completed with result: Canceled", "run.sh said it was stopped in the job")
	got, _ := w.gh.Run(run)
	require.NotEmpty(t, got.AllJobs)
	assert.Contains(t, got.AllJobs[0].Annotations, ghfake.ShutdownMessage, "the job was failed by the stop")
	_, kept := w.gh.Runner(r.ID)
	assert.True(t, len(got.Reruns) > 0 || kept,
		"the job run.sh was stopped in is neither re-run (reruns %v) nor is the registration kept (exit %d)", got.Reruns, code)
}

// The runner's job was not looked up when it started (the listing of
// jobs failed), and the search at the notice is slow and fails; meanwhile
// the job ends by itself and run.sh takes no other: ghrunner cancelled
// nothing, run.sh was stopped in no job, the registration is removed:
// exit 0.
func TestFailedSearchForAJobThatEndedByItselfExits0(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-api-timeout", "3s")
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/jobs", Times: 1, Status: 400}) // the lookup
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "quick", Duration: 1500 * time.Millisecond}}})
	w.runningOn(run, r.ID)
	p.logLine("cannot look up the job run.sh took")
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/jobs", Times: 1, Hang: true})
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/jobs", Times: 1, Status: 400})
	p.signal(syscall.SIGTERM)
	p.stdout.await(t, func(line string) bool { return contains(line, "Job quick completed with result: Succeeded") })
	code := p.exit()
	got, _ := w.gh.Run(run)
	require.Equal(t, "success", got.Conclusion)
	assert.False(t, got.CancelRequested)
	_, kept := w.gh.Runner(r.ID)
	require.False(t, kept, "the registration is removed")
	assert.Equal(t, supervisor.ExitOK, code, "nothing was left undone: %v", p.records("cleanup unfinished"))
}
