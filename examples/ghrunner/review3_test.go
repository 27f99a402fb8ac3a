//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
)

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
	assert.Equal(t, exitOK, code)
}

// slowRunningLineRunSh wraps run.sh so that its "Running job: NAME" line
// reaches ghrunner secs seconds after the listener printed it (a busy
// machine, a full pipe): the listener runs the job meanwhile. The reader
// ignores SIGINT, as a pipe's reader would not be part of the stop.
func slowRunningLineRunSh(t *testing.T, w *world, name string, secs int) {
	t.Helper()
	real := filepath.Join(w.dir, "run-real.sh")
	require.NoError(t, os.Rename(filepath.Join(w.dir, "run.sh"), real))
	require.NoError(t, os.WriteFile(filepath.Join(w.dir, "run.sh"), []byte(
		"#!/bin/bash\n\""+real+"\" \"$@\" 2>&1 | { trap '' INT; while IFS= read -r l; do "+
			"case \"$l\" in *\"Running job: "+name+"\"*) sleep "+strconv.Itoa(secs)+";; esac; printf '%s\\n' \"$l\"; done; }\n"), 0o755))
}

// The runner takes a job just before the notice, and ghrunner has not yet
// read the listener's "Running job" line when it stops run.sh; the search
// for the runner's job fails (an error answer). run.sh's output,
// read to its end once it exited, says it was stopped in that job: the
// job is handed back, or the registration kept for the next start.
// (Found by review: ghrunner decided on what it had read before the
// SIGINT, and the job was lost.)
func TestJobWhoseLineIsReadAfterTheStopIsHandedBack(t *testing.T) {
	w := newWorld(t, 0)
	slowRunningLineRunSh(t, w, "late", 3)
	p := w.start()
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "late"}}})
	w.runningOn(run, r.ID)
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
// exit 0. (Found by review: it was exit 3.)
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
	assert.Equal(t, exitOK, code, "nothing was left undone: %v", p.records("cleanup unfinished"))
}
