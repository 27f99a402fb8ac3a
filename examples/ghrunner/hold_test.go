//go:build unix

package main

// Tests of held terminations (an Auto Scaling termination hook): the job
// finishes, then the registration goes and the hold is released; a hard
// notice, or the hold's end, hands the job back as before. The supervisor
// runs in this process, with termsigtest fakes as its notice sources.

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
	"github.com/termsig/termsig/examples/ghrunner/internal/supervisor"
	"github.com/termsig/termsig/termsigtest"
)

// startHere runs ghrunner's supervisor in this process with the default
// flags and extra ones, and srcs as its only notice sources. Its ops
// server (p.srv) outlives it, until the test ends, so that a test can
// scrape it once the supervisor has returned.
func (w *world) startHere(srcs []termsig.Source, extra ...string) *proc {
	w.t.Helper()
	w.t.Setenv(tokenEnv, testToken)
	w.t.Setenv(allowRootEnv, "1")
	o, err := parseFlags(append(w.defaultArgs(), extra...), io.Discard)
	require.NoError(w.t, err)
	p := &proc{t: w.t, stderr: newLogBuffer(), stdout: newLogBuffer(), done: make(chan struct{}), started: time.Now()}
	log := newLogger(p.stderr, o.logFormat)
	if w.opsConfig != nil {
		w.opsConfig(&o.ops)
	}
	p.srv, err = startOps(o, log)
	require.NoError(w.t, err)
	n := termsig.Config{Logger: log}.New(srcs...)
	go func() {
		defer close(p.done)
		p.status = supervise(o, log, n, p.stdout, p.srv)
	}()
	w.t.Cleanup(func() {
		// A supervisor still running (a test that failed) ends with its
		// run.sh.
		for _, pid := range p.runShPids() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		select {
		case <-p.done:
		case <-time.After(wait):
			w.t.Errorf("the supervisor has not returned after %v", wait)
		}
		n.Stop()
		p.srv.Close()
		if w.t.Failed() || os.Getenv("GHRUNNER_TEST_LOG") != "" {
			w.t.Logf("ghrunner's log:\n%s\nstdout:\n%s", p.stderr, p.stdout)
		}
	})
	return p
}

// A releaser is a termsigtest.Fake that also calls onRelease when a
// notice is released, so that a test can see what held then.
type releaser struct {
	*termsigtest.Fake
	mu        sync.Mutex
	onRelease func(termsig.Notice)
}

func newReleaser(name string) *releaser { return &releaser{Fake: termsigtest.NewFake(name)} }

func (r *releaser) Release(ctx context.Context, nt termsig.Notice) error {
	r.mu.Lock()
	f := r.onRelease
	r.mu.Unlock()
	if f != nil {
		f(nt)
	}
	return r.Fake.Release(ctx, nt)
}

// heldNotice is an Auto Scaling termination hook's notice: the instance is
// held until it is released, or for in as the hold stands.
func heldNotice(in time.Duration) termsig.Notice {
	now := time.Now()
	return termsig.Notice{
		Kind: termsig.Terminate, Event: "lifecycle/terminate", Reason: "scale-in: termination hook",
		Deadline: now.Add(in), Held: true, HoldLimit: now.Add(48 * time.Hour),
	}
}

// send sends nt from f and waits until it is on the Notifier's channel.
func send(t *testing.T, f *termsigtest.Fake, nt termsig.Notice) {
	t.Helper()
	select {
	case <-f.Send(nt):
	case <-time.After(wait):
		t.Fatalf("the notice %v was not delivered", nt)
	}
}

// runningHere starts the supervisor with srcs and a job that runs until
// it is told to end (job's Duration 0) or for its Duration.
func (w *world) runningHere(srcs []termsig.Source, job ghfake.JobSpec, extra ...string) (*proc, ghfake.Runner, int64) {
	w.t.Helper()
	p := w.startHere(srcs, extra...)
	r := w.onlineRunner("spot-1")
	run := w.gh.AddRun("acme/app", ghfake.RunSpec{Name: "CI", Jobs: []ghfake.JobSpec{job}})
	w.runningOn(run, r.ID)
	p.stdout.await(w.t, func(line string) bool { return contains(line, "Running job: "+job.Name) })
	return p, r, run
}

// checkReleased checks that f's notices were released once: each the
// latest of its event, want.
func checkReleased(t *testing.T, f *termsigtest.Fake, want termsig.Notice) {
	t.Helper()
	got := f.Released()
	require.Len(t, got, 1, "released once")
	assert.Equal(t, want.Event, got[0].Event)
	assert.Equal(t, want.Held, got[0].Held)
	assert.True(t, want.Deadline.Equal(got[0].Deadline), "the latest notice, deadline %v, is released, not %v", want.Deadline, got[0].Deadline)
}

func TestHeldTerminationLetsTheJobFinishThenUnregistersAndReleases(t *testing.T) {
	w := newWorld(t, 0)
	asg := newReleaser("asg")
	p, r, run := w.runningHere([]termsig.Source{asg}, ghfake.JobSpec{Name: "build"})
	registeredAtRelease := make(chan bool, 1)
	asg.mu.Lock()
	asg.onRelease = func(termsig.Notice) {
		_, still := w.gh.Runner(r.ID)
		registeredAtRelease <- still
	}
	asg.mu.Unlock()

	held := heldNotice(10 * time.Minute)
	send(t, asg.Fake, held)
	rec := p.logLine("letting the job finish")
	assert.Equal(t, "build", rec["job"])
	// The hold keeps the job running: nothing is cancelled or removed.
	got, _ := w.gh.Run(run)
	assert.False(t, got.CancelRequested)
	_, still := w.gh.Runner(r.ID)
	assert.True(t, still, "registered while the job runs")
	assert.Empty(t, asg.Released())

	require.True(t, w.gh.FinishJob(run), "the job's steps are done")
	require.Equal(t, supervisor.ExitOK, p.exit())
	got, _ = w.gh.Run(run)
	assert.Equal(t, "success", got.Conclusion, "the job finished by itself")
	assert.False(t, got.CancelRequested)
	assert.Empty(t, got.Reruns)
	assert.Empty(t, w.calls("POST", "/cancel"), "nothing cancelled")
	_, still = w.gh.Runner(r.ID)
	assert.False(t, still, "registration removed")
	checkReleased(t, asg.Fake, held)
	assert.False(t, <-registeredAtRelease, "released once the registration was removed")
	p.logLine("job ended within the hold")
	for _, pid := range p.runShPids() {
		assert.True(t, groupGone(pid), "run.sh's process group %d is gone", pid)
	}
}

// With no job to wait for, a held termination cleans up at once: the
// instance goes as soon as the registration is removed.
func TestHeldTerminationWithoutAJobCleansUpAtOnce(t *testing.T) {
	w := newWorld(t, 0)
	asg := newReleaser("asg")
	p := w.startHere([]termsig.Source{asg})
	r := w.onlineRunner("spot-1")
	p.stdout.await(t, func(line string) bool { return contains(line, "Listening for Jobs") })
	held := heldNotice(10 * time.Minute)
	send(t, asg.Fake, held)
	require.Equal(t, supervisor.ExitOK, p.exit())
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "registration removed")
	checkReleased(t, asg.Fake, held)
	p.logLine("run.sh runs no job")
}

// A later held notice for the same event moves the hold's end, and so
// when the job is handed back: the job, which ends by itself after the
// first notice's hand-back time (4 s after it: its deadline 7 s away less
// a third of the hold, at least -margin and 2 s), still finishes.
func TestHeldDeadlineMovedLaterExtendsTheWaitForTheJob(t *testing.T) {
	w := newWorld(t, 0)
	asg := newReleaser("asg")
	p, r, run := w.runningHere([]termsig.Source{asg}, ghfake.JobSpec{Name: "build", Duration: 8 * time.Second})
	first := heldNotice(7 * time.Second)
	send(t, asg.Fake, first)
	rec := p.logLine("letting the job finish")
	in, _ := rec["hand_back_in"].(float64) // nanoseconds
	assert.Less(t, time.Duration(in), 5*time.Second, "the first notice's hold ends soon")

	extended := first
	extended.Deadline = time.Now().Add(10 * time.Minute)
	send(t, asg.Fake, extended)
	rec = p.logLine("the hold moved")
	in, _ = rec["hand_back_in"].(float64)
	assert.Greater(t, time.Duration(in), 5*time.Minute, "the hand-back moved with the deadline")

	require.Equal(t, supervisor.ExitOK, p.exit())
	got, _ := w.gh.Run(run)
	assert.Equal(t, "success", got.Conclusion, "the job ran its 8 s")
	assert.False(t, got.CancelRequested, "not handed back at the first notice's time")
	assert.Empty(t, got.Reruns)
	_, still := w.gh.Runner(r.ID)
	assert.False(t, still, "registration removed")
	checkReleased(t, asg.Fake, extended)
}

// A hard notice (a spot interruption) during the hold wins at once: the
// job is handed back as without a hold, and both notices are released.
func TestHardNoticeDuringHoldWinsAtOnce(t *testing.T) {
	w := newWorld(t, 0)
	asg, spot := newReleaser("asg"), termsigtest.NewFake("imds")
	p, r, run := w.runningHere([]termsig.Source{asg, spot}, ghfake.JobSpec{Name: "build"})
	held := heldNotice(time.Hour)
	send(t, asg.Fake, held)
	p.logLine("letting the job finish")
	hard := termsig.Notice{Kind: termsig.Terminate, Event: "spot/instance-action", Reason: "spot interruption: terminate", Deadline: time.Now().Add(2 * time.Minute)}
	send(t, spot, hard)
	w.checkCleanedUp(p, r, run)
	p.logLine("a hard notice during the hold")
	checkReleased(t, asg.Fake, held)
	checkReleased(t, spot, hard)
}

// A later notice for the held event that is not held says that the hold
// is over: the job is handed back by its deadline, at once.
func TestHoldLapsedHandsTheJobBackAtOnce(t *testing.T) {
	w := newWorld(t, 0)
	asg := newReleaser("asg")
	p, r, run := w.runningHere([]termsig.Source{asg}, ghfake.JobSpec{Name: "build"})
	held := heldNotice(time.Hour)
	send(t, asg.Fake, held)
	p.logLine("letting the job finish")
	lapsed := held
	lapsed.Held, lapsed.HoldLimit, lapsed.Deadline = false, time.Time{}, time.Now().Add(time.Minute)
	send(t, asg.Fake, lapsed)
	w.checkCleanedUp(p, r, run)
	p.logLine("the hold is over")
}

// A job still running when the hold's end is near, or -max-hold after the
// first held notice, is handed back as after a hard notice: cancelled,
// re-run, and the registration removed, before the hold's end.
func TestHoldEndReachedHandsTheJobBackAsForAHardNotice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hold  time.Duration // the held notice's deadline, from now
		extra []string
	}{
		// Handed back 3 s before the deadline (-margin 1 s plus 2 s, more
		// than a third of the hold), 6 s from now.
		{name: "deadline", hold: 9 * time.Second},
		{name: "max-hold", hold: time.Hour, extra: []string{"-max-hold", "2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 0)
			asg := newReleaser("asg")
			p, r, run := w.runningHere([]termsig.Source{asg}, ghfake.JobSpec{Name: "build"}, tc.extra...)
			held := heldNotice(tc.hold)
			send(t, asg.Fake, held)
			p.logLine("letting the job finish")
			w.checkCleanedUp(p, r, run)
			assert.True(t, time.Now().Before(held.Deadline), "done before the hold's end")
			p.logLine("the hold's end is near")
			checkReleased(t, asg.Fake, held)
		})
	}
}
