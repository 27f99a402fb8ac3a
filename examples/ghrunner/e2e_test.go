//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
)

// startWithJob starts ghrunner, waits for its runner to be online and for
// a job that runs until cancelled to run on it.
func (w *world) startWithJob(extra ...string) (*proc, ghfake.Runner, int64) {
	w.t.Helper()
	p := w.start(extra...)
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "build"}}})
	w.runningOn(run, r.ID)
	p.stdout.await(w.t, func(line string) bool { return contains(line, "Running job: build") })
	return p, r, run
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// checkCleanedUp checks the end of a cleanup after a job was interrupted:
// the run cancelled and re-run once, the registration removed, run.sh's
// process group gone, exit 0.
func (w *world) checkCleanedUp(p *proc, r ghfake.Runner, run int64) {
	w.t.Helper()
	require.Equal(w.t, exitOK, p.exit(), "exit status")
	got, ok := w.gh.Run(run)
	require.True(w.t, ok)
	assert.True(w.t, got.CancelRequested, "run cancelled")
	assert.Equal(w.t, []string{"failed"}, got.Reruns, "re-run once, its failed jobs")
	assert.EqualValues(w.t, 2, got.Attempt, "a new attempt")
	_, still := w.gh.Runner(r.ID)
	assert.False(w.t, still, "registration removed")
	for _, pid := range p.runShPids() {
		assert.True(w.t, groupGone(pid), "run.sh's process group %d is gone", pid)
	}
	runPath := "/runs/" + itoa(run)
	cancel, rerun, del := w.answered("POST", runPath+"/cancel"), w.answered("POST", runPath+"/rerun-failed-jobs"), w.answered("DELETE", "/actions/runners/"+itoa(r.ID))
	require.Len(w.t, cancel, 1)
	require.Len(w.t, rerun, 1)
	require.NotEmpty(w.t, del)
	assert.True(w.t, cancel[0].At.Before(rerun[0].At), "cancel, then re-run")
	assert.True(w.t, cancel[0].At.Before(del[len(del)-1].At), "cancel, then unregister")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

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
	require.Equal(t, exitOK, p.exit())
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "registration removed")
	assert.Empty(t, w.calls("POST", "/cancel"))
	assert.Empty(t, w.calls("POST", "/rerun-failed-jobs"))
	for _, pid := range p.runShPids() {
		assert.True(t, groupGone(pid))
	}
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

func TestAPIDownExits3BeforeTheDeadline(t *testing.T) {
	w := newWorld(t, 0)
	p, _, _ := w.startWithJob()
	w.gh.Inject(ghfake.Fault{Status: 503})
	deadline := time.Now().Add(8 * time.Second)
	w.md.SetInterruption("terminate", deadline)
	require.Equal(t, exitDeadline, p.exit())
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
	require.Equal(t, exitDeadline, p.exit())
	assert.True(t, time.Now().Before(deadline), "exit 3 before the deadline, not at it")
}

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
	require.Equal(t, exitOK, p.exit())
}

func TestStaleRegistrationsJobThatFailedByItselfIsNotRerun(t *testing.T) {
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
	require.Equal(t, exitOK, p2.exit())
}

func TestOnlineRunnerOfTheSameNameIsNotTakenOver(t *testing.T) {
	w := newWorld(t, 0)
	theirs := w.gh.AddRunner("acme/app", ghfake.RunnerSpec{Name: "spot-1", Online: true})
	p := w.start()
	require.Equal(t, exitFailed, p.exit())
	assert.Contains(t, p.logLine("cannot start")["err"], "give each machine its own -name")
	_, kept := w.gh.Runner(theirs)
	assert.True(t, kept)
}

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
	require.Equal(t, exitOK, p.exit())
}

func TestEphemeralExitsAfterItsJob(t *testing.T) {
	w := newWorld(t, 0)
	p := w.start("-ephemeral")
	r := w.onlineRunner("spot-1")
	assert.True(t, r.Ephemeral)
	w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{{Name: "once", Duration: time.Millisecond}}})
	require.Equal(t, exitOK, p.exit())
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still)
}

func TestNoticeWhileStartingEndsQuickly(t *testing.T) {
	w := newWorld(t, 0)
	w.gh.Inject(ghfake.Fault{Path: "/registration-token", Hang: true})
	p := w.start()
	w.await("the registration token asked for", func() bool { return len(w.calls("POST", "/registration-token")) > 0 })
	start := time.Now()
	p.signal(syscall.SIGTERM)
	require.Equal(t, exitOK, p.exit())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, w.gh.Runners(), "nothing registered")
	_, err := os.Stat(filepath.Join(w.dir, runnerFile))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestTokenNeverReachesTheRunner(t *testing.T) {
	w := newWorld(t, 0)
	p, _, _ := w.startWithJob()
	if runtime.GOOS == "linux" {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.runShPids()[0]))
		require.NoError(t, err)
		assert.NotContains(t, string(env), tokenEnv+"=")
		assert.NotContains(t, string(env), testToken)
	}
	p.signal(syscall.SIGTERM)
	require.Equal(t, exitOK, p.exit())
	assert.NotContains(t, p.stderr.String(), testToken)
	assert.NotContains(t, p.stdout.String(), testToken)
}

// githubClient is a client of the fake GitHub, as a person would use.
func githubClient(w *world) *github.Client {
	c := github.NewClient(nil).WithAuthToken(testToken)
	u, err := c.BaseURL.Parse(w.gh.APIURL())
	require.NoError(w.t, err)
	c.BaseURL = u
	return c
}

// requireAccepted accepts go-github's AcceptedError for a 202.
func requireAccepted(t *testing.T, err error) {
	t.Helper()
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		t.Fatal(err)
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

// With -user, run.sh (so every job) runs as that user, without the token
// in its environment, and cannot read ghrunner's: the token stays with
// ghrunner, which runs as root. (Found by review: jobs ran as ghrunner's
// user and could read /proc/PID/environ.)
func TestUserKeepsTheTokenFromTheJobs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test starts the runner as another user: run it as root (CI does)")
	}
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	w := newWorld(t, 0)
	// A runner directory nobody can use, with the fake runner's binary in it.
	dir, err := os.MkdirTemp("", "ghrunner-user")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, exe, filepath.Join(dir, "fake-runner"))
	require.NoError(t, ghfake.WriteRunnerDir(dir, filepath.Join(dir, "fake-runner")))
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	require.NoError(t, filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(path, uid, gid)
		}
		return err
	}))
	require.NoError(t, os.Chmod(dir, 0o755))

	p := w.start("-runner-dir", dir, "-user", "nobody")
	w.onlineRunner("spot-1")
	pid := p.runShPids()[0]
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^Uid:\s+`+nobody.Uid+`\s`, string(status), "run.sh runs as nobody")
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	assert.NotContains(t, string(env), testToken)
	assert.Contains(t, string(env), "USER=nobody")

	// What a job of nobody's can read of ghrunner's environment: nothing.
	cat := exec.Command("cat", fmt.Sprintf("/proc/%d/environ", p.cmd.Process.Pid))
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cat.CombinedOutput()
	assert.Error(t, err, "nobody reads ghrunner's environment: %s", out)
	assert.NotContains(t, string(out), testToken)

	p.signal(syscall.SIGTERM)
	require.Equal(t, exitOK, p.exit())
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
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
	require.Equal(t, exitOK, p2.exit())
}
