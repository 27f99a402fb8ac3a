//go:build unix

package main

// Tests of the cleanup after an imminent notice: cancel, stop, re-run,
// unregister, within the deadline.

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
)

func TestSpotInterruptionMidJob(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithJob()
	deadline := time.Now().Add(2 * time.Minute)
	w.md.SetInterruption("terminate", deadline)
	w.checkCleanedUp(p, r, run)
	assert.True(t, time.Now().Before(deadline.Add(-time.Second)), "done before the deadline minus the margin")
	p.logLine("cleanup done")
}

func TestSIGTERMMidJobCleansUpTheSame(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithJob()
	p.signal(syscall.SIGTERM)
	w.checkCleanedUp(p, r, run)
}

func TestNoJobOnlyUnregisters(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start()
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	w.md.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	require.Equal(t, supervisor.ExitOK, p.exit())
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "registration removed")
	assert.Empty(t, w.calls("POST", "/cancel"))
	assert.Empty(t, w.calls("POST", "/rerun-failed-jobs"))
	for _, pid := range p.runShPids() {
		assert.True(t, groupGone(pid))
	}
}

func TestJobLookedUpWhenItStartsSavesTheSearch(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithJob()
	p.logLine("the runner runs")
	searches := len(w.calls("GET", "/jobs"))
	// Listing jobs now would fail: the cleanup must not need to.
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/jobs", Status: 500})
	w.md.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	w.checkCleanedUp(p, r, run)
	assert.Len(t, w.calls("GET", "/jobs"), searches, "no search after the notice")
	p.logLine("looked up when it started")
}

// An organisation's runner: its job is found among the organisation's
// repositories' runs, and handed back the same way.
func TestOrgRunner(t *testing.T) {
	w := newWorld(t, 0)
	w.gh.AddRun("acme/other", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "elsewhere", Labels: []string{"gpu"}}}})
	p := w.start("-repo", "", "-org", "acme")
	r := w.onlineRunner("spot-1")
	assert.Equal(t, "acme", r.Scope)
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
	w.runningOn(run, r.ID)
	p.logLine("the runner runs")
	w.md.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	w.checkCleanedUp(p, r, run)
	assert.NotEmpty(t, w.answered("GET", "/orgs/acme/repos"))
}

func TestRateLimitedThenRecovered(t *testing.T) {
	w := newWorld(t, 0)
	p, r, run := w.startWithJob()
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, RateLimit: ghfake.RateLimitSecondary, Wait: time.Second})
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/rerun-failed-jobs", Times: 1, RateLimit: ghfake.RateLimit429, Wait: time.Second})
	w.gh.Inject(ghfake.Fault{Method: "DELETE", Times: 1, RateLimit: ghfake.RateLimitPrimary, Wait: time.Second})
	w.gh.Inject(ghfake.Fault{Method: "GET", Path: "/jobs", Times: 2, Status: 502})
	w.md.SetInterruption("terminate", time.Now().Add(2*time.Minute))
	w.checkCleanedUp(p, r, run)
	assert.GreaterOrEqual(t, len(p.records("trying again")), 4, "each fault was waited out")
	for _, rec := range p.records("trying again") {
		assert.NotEmpty(t, rec["step"], "the log names the step")
	}
}

// A rate limit whose end is past the step's end makes the step give up at
// once, and run.sh still gets its moment between SIGINT and SIGKILL.
// The step's context has the cleanup's end as its deadline, which is how
// the call can tell.
func TestRateLimitPastTheEndDuringCleanupGivesUpAtOnce(t *testing.T) {
	w := newWorld(t, 0)
	p, _, run := w.startWithJob("-stop-timeout", "15s")
	w.gh.Inject(ghfake.Fault{Method: "POST", Path: "/cancel", Times: 1, RateLimit: ghfake.RateLimit429, Wait: 10 * time.Minute})
	p.signal(syscall.SIGTERM)
	require.Equal(t, supervisor.ExitDeadline, p.exit(), "the cancel did fail")
	rec := stepRecord(p, "cancel run")
	require.NotNil(t, rec)
	took, _ := rec["took"].(float64)
	assert.Less(t, time.Duration(took), 2*time.Second, "cancel gave up at once: %v", rec["err"])
	assert.Contains(t, fmt.Sprint(rec["err"]), "would be after the deadline")
	assert.Empty(t, p.records("still running at its kill time"), "run.sh got time to stop after SIGINT")
	got, _ := w.gh.Run(run)
	assert.NotEmpty(t, got.Reruns, "the interrupted run is re-run")
}

func TestAPIDownExits3BeforeTheDeadline(t *testing.T) {
	w := newWorld(t, 0)
	p, _, _ := w.startWithJob()
	w.gh.Inject(ghfake.Fault{Status: 503})
	deadline := time.Now().Add(8 * time.Second)
	w.md.SetInterruption("terminate", deadline)
	require.Equal(t, supervisor.ExitDeadline, p.exit())
	assert.True(t, time.Now().Before(deadline), "exit 3 before the deadline, not at it")
	rec := p.logLine("cleanup unfinished")
	assert.Contains(t, rec["unfinished"], "find the runner's job")
	assert.Contains(t, rec["unfinished"], "remove the registration")
	for _, pid := range p.runShPids() {
		assert.True(t, groupGone(pid), "run.sh is stopped even so")
	}
}

func TestAPIHangingExits3BeforeTheDeadline(t *testing.T) {
	w := newWorld(t, 0)
	p, _, _ := w.startWithJob("-api-timeout", "1s")
	w.gh.Inject(ghfake.Fault{Hang: true})
	deadline := time.Now().Add(8 * time.Second)
	w.md.SetInterruption("terminate", deadline)
	require.Equal(t, supervisor.ExitDeadline, p.exit())
	assert.True(t, time.Now().Before(deadline), "exit 3 before the deadline, not at it")
}

// After a clean stop, no process is left in run.sh's process group, not
// even one that ignored SIGINT.
func TestRunShGroupEndsWithRunSh(t *testing.T) {
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
