//go:build unix

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghapi"
	"github.com/termsig/termsig/examples/ghrunner/internal/runner"
	"github.com/termsig/termsig/internal/backoff"
)

// A drain is the cleanup after an imminent notice. It runs in a goroutine
// of its own, so that a later notice can still bring its end forward.
type drain struct {
	s     *supervisor
	nt    termsig.Notice  // the notice whose deadline the cleanup goes by
	child *runner.Process // nil when the notice came before run.sh started
	busy  bool            // run.sh said it runs a job
	// afterJob says that the drain began because run.sh's job ended
	// within a hold: the job is done, and not looked for.
	afterJob bool
	// started is how many jobs run.sh had said it took when the drain
	// began: the job looked up when it started is known for that count.
	started   int
	killed    bool       // run.sh had to be killed
	noticeJob *ghapi.Job // the job found, when run.sh said it ran one at the notice
	// cancelled holds the jobs whose run ghrunner's cancel ended: GitHub
	// accepted the cancel.
	cancelled map[*ghapi.Job]bool
	done      chan int
	// release holds the notices released when the drain is done: its
	// notice, and those of a hold it ended.
	release []termsig.Notice

	mu    sync.Mutex
	later []termsig.Notice // the imminent notices that came during the drain
	end   time.Time        // all steps end by then: the deadline minus the margin
	spare time.Duration    // kept after run.sh's SIGKILL for re-running and removing
	// moved is closed, and replaced, when end moves forward: the contexts
	// derived for the old end are cancelled with errEndMoved.
	moved chan struct{}

	stepsMu sync.Mutex
	steps   []step
}

// A step is one part of the cleanup, for the summary.
type step struct {
	name string
	took time.Duration
	err  error
}

// minDrain is the least time the cleanup gets, even when the deadline
// minus the margin has passed: one API call may still make it.
const minDrain = 2 * time.Second

// maxSpare bounds the time kept for re-running and removing the
// registration after run.sh is killed.
const maxSpare = 10 * time.Second

// stopGrace is the least time run.sh gets between SIGINT and SIGKILL
// (unless the end comes first).
const stopGrace = time.Second

var (
	errDeadline = errors.New("the deadline minus -margin has come")
	errKillTime = errors.New("run.sh's kill time has come (the spare kept for re-running and unregistering is left)")
	errEndMoved = errors.New("an earlier deadline moved the cleanup's end forward")
)

// A by picks, from the drain's end and spare as they are now, when a step
// must be done and the cause its context is cancelled with then.
type by func(end time.Time, spare time.Duration) (time.Time, error)

// The ends of the steps.
var (
	// byEnd is the end itself: the re-run and the unregistering.
	byEnd by = func(end time.Time, _ time.Duration) (time.Time, error) { return end, errDeadline }
	// byKill is run.sh's kill time, the spare before the end: finding
	// the job and cancelling its run.
	byKill by = func(end time.Time, spare time.Duration) (time.Time, error) {
		return end.Add(-spare), errKillTime
	}
	// byHalfSpare leaves half the spare: the force-cancel and the wait
	// for the run after run.sh was killed.
	byHalfSpare by = func(end time.Time, spare time.Duration) (time.Time, error) {
		return end.Add(-spare / 2), context.DeadlineExceeded
	}
)

// startDrain starts the cleanup after nt, a hard notice or one that
// cannot wait; a hold under way ends, and its notices are released with
// nt's.
func (s *supervisor) startDrain(nt termsig.Notice) {
	s.ops.Acted(nt)
	s.beginDrain(nt, append([]termsig.Notice{nt}, s.stopHold()...), false)
}

// beginDrain starts the cleanup whose end nt gives, releasing release
// when it is done; afterJob says that run.sh's job ended within a hold.
func (s *supervisor) beginDrain(nt termsig.Notice, release []termsig.Notice, afterJob bool) {
	d := &drain{s: s, nt: nt, child: s.child, done: make(chan int, 1), moved: make(chan struct{}), cancelled: map[*ghapi.Job]bool{},
		release: release, afterJob: afterJob}
	if d.child != nil {
		d.busy, _, _ = d.child.State()
		d.started = d.child.JobsStarted()
	}
	d.end = s.endOf(nt)
	d.spare = min(maxSpare, time.Until(d.end)/3)
	s.log.Warn("ghrunner: cleanup", "end_in", time.Until(d.end).Round(time.Millisecond), "kill_in", time.Until(d.end.Add(-d.spare)).Round(time.Millisecond))
	s.drain = d
	go func() { d.done <- d.run() }()
}

// endOf is when the cleanup after nt must be done: its deadline (at most
// -stop-timeout after it was seen; that without a deadline) minus the
// margin, but at least minDrain from now.
func (s *supervisor) endOf(nt termsig.Notice) time.Time {
	seen := nt.Observed
	if seen.IsZero() {
		seen = time.Now()
	}
	dl := seen.Add(s.cfg.StopTimeout)
	if !nt.Deadline.IsZero() && nt.Deadline.Before(dl) {
		dl = nt.Deadline
	}
	return later(dl.Add(-s.cfg.Margin), time.Now().Add(minDrain))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// tighten brings the end forward for a later notice with an earlier
// deadline (on GCE the power button comes without one, the metadata
// server's preemption a moment later with 30 s). The steps under way then
// start again, with contexts whose deadline is the new end.
func (d *drain) tighten(nt termsig.Notice) {
	end := d.s.endOf(nt)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.later = append(d.later, nt)
	if !end.Before(d.end) {
		d.s.log.Info("ghrunner: another imminent notice; the end stays", "notice", nt, "end_in", time.Until(d.end).Round(time.Millisecond))
		return
	}
	d.end = end
	d.spare = min(d.spare, time.Until(end)/3)
	close(d.moved)
	d.moved = make(chan struct{})
	d.s.ops.Acted(nt) // the steps under way start again by the new end
	d.s.log.Warn("ghrunner: an earlier deadline: the cleanup's end moves forward", "notice", nt, "end_in", time.Until(end).Round(time.Millisecond))
}

// times returns the end and the spare, and a channel closed when they
// change.
func (d *drain) times() (time.Time, time.Duration, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.end, d.spare, d.moved
}

// ctx returns a context whose deadline is when, by the end as it is now;
// when the end moves forward, it is cancelled with errEndMoved. Call the
// CancelFunc when done with it.
func (d *drain) ctx(when by) (context.Context, context.CancelFunc) {
	end, spare, moved := d.times()
	dl, cause := when(end, spare)
	base, cancelBase := context.WithCancelCause(context.Background())
	ctx, cancel := context.WithDeadlineCause(base, dl, cause)
	go func() {
		select {
		case <-moved:
			cancelBase(errEndMoved)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); cancelBase(nil) }
}

// within runs f with a context that ends when says, and again with a new
// one each time f fails because the end moved forward meanwhile: a
// context's deadline never changes, so that a call can tell from it
// whether waiting (a rate limit) would still end in time.
func (d *drain) within(when by, f func(context.Context) error) error {
	for {
		ctx, cancel := d.ctx(when)
		err := f(ctx)
		moved := errors.Is(context.Cause(ctx), errEndMoved)
		cancel()
		if err == nil || !moved {
			return err
		}
		d.s.log.Info("ghrunner: the end moved forward: the step starts again by it", "err", err)
	}
}

// do runs one step and records it.
func (d *drain) do(name string, f func() error) error {
	start := time.Now()
	err := f()
	d.record(step{name: name, took: time.Since(start), err: err})
	attrs := []any{"step", name, "took", time.Since(start).Round(time.Millisecond), "t", d.since()}
	if err != nil {
		d.s.log.Error("ghrunner: step failed", append(attrs, "err", err)...)
	} else {
		d.s.log.Info("ghrunner: step done", attrs...)
	}
	return err
}

// doBy runs one step, f, within when, and records it.
func (d *drain) doBy(name string, when by, f func(context.Context) error) error {
	return d.do(name, func() error { return d.within(when, f) })
}

// supersede forgets the failure of step name: a later step did its work.
func (d *drain) supersede(name string) {
	d.stepsMu.Lock()
	defer d.stepsMu.Unlock()
	for i := range d.steps {
		if d.steps[i].name == name && d.steps[i].err != nil {
			d.s.log.Info("ghrunner: a failed step's work was done by a later one", "step", name)
			d.steps[i].err = nil
		}
	}
}

func (d *drain) record(s step) {
	d.stepsMu.Lock()
	defer d.stepsMu.Unlock()
	d.steps = append(d.steps, s)
}

// since is the time from the notice, for the log.
func (d *drain) since() string {
	return "T+" + time.Since(d.nt.Observed).Round(time.Millisecond).String()
}

// run does the cleanup and returns the exit status: 0 when every step
// is done, 3 when the end came first. Once run.sh has stopped, the
// registration is removed while the run is waited for and re-run: a run
// slow to complete does not hold up the unregistering. But when run.sh
// was interrupted in a job that cannot be found, the registration is
// kept: the next start of a runner of this name finds it offline and
// re-runs the job it lost.
func (d *drain) run() int {
	s := d.s
	var jobs []*ghapi.Job // the jobs to hand back
	j := d.findJob()
	if d.busy {
		d.noticeJob = j // run.sh's job when the notice came
	}
	if j != nil {
		_ = d.doBy(fmt.Sprintf("cancel run %d", j.Run), byKill, func(ctx context.Context) error { return d.cancelRun(ctx, j) })
		jobs = append(jobs, j)
	}
	lost := false // run.sh was stopped in a job that was not found
	if d.child != nil {
		_ = d.do("stop run.sh", d.stopChild)
		jobs, lost = d.afterStop(j, jobs)
	}
	var wg sync.WaitGroup
	switch {
	case s.reg == nil:
	case lost:
		d.record(step{
			name: fmt.Sprintf("remove the registration of runner %d", s.reg.ID),
			err:  fmt.Errorf("kept, so that the next start of a runner named %q re-runs the job run.sh was interrupted in, which was not found", s.cfg.Runner.Name),
		})
		s.m.unregistered(resultKept)
	default:
		wg.Go(func() {
			err := d.doBy(fmt.Sprintf("remove the registration of runner %d", s.reg.ID), byEnd, s.unregister)
			s.m.unregistered(okOr(err))
			if err == nil {
				s.ops.Outcome(d.nt, OutcomeUnregistered, map[string]string{"runner_id": strconv.FormatInt(s.reg.ID, 10)})
			}
		})
	}
	for _, j := range jobs {
		d.rerun(j)
	}
	wg.Wait()
	return d.summary()
}

// afterStop looks at what run.sh said, all of it now that it has exited:
// its last job, if it was stopped in it or cancelled, is to be handed
// back. When that is not the job j found at the notice (run.sh took it
// since, or the search failed), it is looked for now, and added to jobs;
// lost says it was not found. The job found is run.sh's job at the
// notice, or, when run.sh had not said it took one yet, the next.
func (d *drain) afterStop(j *ghapi.Job, jobs []*ghapi.Job) ([]*ghapi.Job, bool) {
	last := d.child.JobsStarted()
	res := d.child.Result(last)
	stoppedIn := (last > d.started || d.busy) && (res == "" || res == "Canceled")
	seq := d.started
	if !d.busy {
		seq++
	}
	if j == nil && !stoppedIn {
		d.supersede("find the runner's job") // it had no job to hand back
	}
	if d.s.reg == nil || !stoppedIn || (j != nil && last == seq) {
		return jobs, false
	}
	late := d.interruptedJob()
	switch {
	case late == nil:
		return jobs, true
	case j != nil && late.Run == j.Run:
		jobs[0] = late // one re-run per run, for the job that was stopped
	default:
		jobs = append(jobs, late)
	}
	d.supersede("find the runner's job")
	return jobs, false
}

// findJob returns the job run.sh runs: the one looked up when it started,
// or else what the API says now.
func (d *drain) findJob() *ghapi.Job {
	s := d.s
	if s.reg == nil || d.child == nil {
		return nil
	}
	if d.afterJob && !d.busy {
		// GitHub may show the job that just ended as running a moment
		// longer: a search would cancel its run.
		return nil
	}
	if j := s.known.get(d.child, d.started); j != nil && d.busy {
		s.log.Info("ghrunner: the runner's job, looked up when it started", "job", j)
		return j
	}
	var j *ghapi.Job
	_ = d.doBy("find the runner's job", byKill, func(ctx context.Context) (err error) {
		j, err = s.api.FindJob(ctx, s.reg.ID, d.busy)
		if err == nil {
			s.log.Info("ghrunner: the runner's job", "job", jobOrNone(j))
		}
		return err
	})
	return j
}

// interruptedJob finds the job run.sh was running when it was stopped,
// which the search before did not find (run.sh took it after the search,
// or the search failed), and cancels its run: stopping run.sh failed it
// ("received a shutdown signal"), and its run is to be re-run like any
// other.
func (d *drain) interruptedJob() *ghapi.Job {
	s := d.s
	var j *ghapi.Job
	err := d.doBy("find the job run.sh was stopped in", byKill, func(ctx context.Context) (err error) {
		j, err = s.api.InterruptedJob(ctx, s.reg.ID)
		if err == nil && j == nil {
			err = errors.New("run.sh said it ran a job, but GitHub shows none")
		}
		return err
	})
	if err != nil {
		return nil
	}
	s.log.Info("ghrunner: the job run.sh was stopped in", "job", j)
	if d.doBy(fmt.Sprintf("cancel run %d", j.Run), byKill, func(ctx context.Context) error { return d.cancelRun(ctx, j) }) != nil {
		return nil
	}
	return j
}

// cancelRun cancels j's run; one that has completed needs none. When
// GitHub accepts the cancel, the run had jobs left to run, which the cancel
// ends: the run is then handed back whatever became of j.
func (d *drain) cancelRun(ctx context.Context, j *ghapi.Job) error {
	err := d.s.api.Cancel(ctx, j)
	switch {
	case errors.Is(err, ghapi.ErrRunCompleted):
		return nil
	case err == nil:
		d.cancelled[j] = true
	}
	return err
}

func jobOrNone(j *ghapi.Job) string {
	if j == nil {
		return "none"
	}
	return j.String()
}

// stopChild interrupts run.sh's process group and waits for run.sh to
// exit, killing the group at the kill time.
func (d *drain) stopChild() error {
	if err := d.child.Interrupt(); err != nil {
		d.s.log.Warn("ghrunner: cannot interrupt run.sh", "err", err)
	}
	// Past the kill time already, run.sh still gets a moment to hand its
	// job back before SIGKILL.
	end, _, _ := d.times()
	grace := time.NewTimer(min(stopGrace, time.Until(end)))
	defer grace.Stop()
	select {
	case <-d.child.Done():
		d.s.log.Info("ghrunner: run.sh exited", "status", d.child.Status())
		return nil
	case <-grace.C:
	}
	err := d.within(byKill, func(ctx context.Context) error {
		select {
		case <-d.child.Done():
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	if err == nil {
		d.s.log.Info("ghrunner: run.sh exited", "status", d.child.Status())
		return nil
	}
	d.s.log.Warn("ghrunner: run.sh is still running at its kill time: SIGKILL to its process group", "pgid", d.child.Pid())
	d.child.Kill()
	d.killed = true
	return d.within(byEnd, func(ctx context.Context) error {
		select {
		case <-d.child.Done():
			return fmt.Errorf("run.sh did not stop when interrupted; killed (status %d)", d.child.Status())
		case <-ctx.Done():
			return fmt.Errorf("run.sh did not exit even when killed: %w", context.Cause(ctx))
		}
	})
}

// rerun waits for j's run to complete and re-runs it. When run.sh had
// to be killed, its listener could not tell GitHub that the job ended:
// the run is force-cancelled, or it would wait for the lost runner; that
// and the wait take half the spare time left after the kill.
func (d *drain) rerun(j *ghapi.Job) {
	s := d.s
	result := resultFailed // until it is known
	defer func() {
		if result != "" {
			s.m.rerun(result)
		}
		if result == resultOK {
			s.ops.Outcome(d.nt, OutcomeRerun, map[string]string{
				"repo": j.Repo.String(), "run": strconv.FormatInt(j.Run, 10), "attempt": strconv.FormatInt(j.Attempt+1, 10), "job": j.Name,
			})
		}
	}()
	wait := byKill
	if d.killed {
		wait = byHalfSpare
		err := d.doBy(fmt.Sprintf("force-cancel run %d", j.Run), wait, func(ctx context.Context) error {
			err := s.api.ForceCancel(ctx, j)
			if errors.Is(err, ghapi.ErrRunCompleted) {
				return nil
			}
			return err
		})
		if err != nil {
			return
		}
	}
	if d.doBy(fmt.Sprintf("wait for run %d to complete", j.Run), wait, func(ctx context.Context) error { return s.waitCompleted(ctx, j) }) != nil {
		d.record(step{name: fmt.Sprintf("re-run run %d", j.Run), err: errors.New("not tried: the run has not completed")})
		return
	}
	err := d.doBy(fmt.Sprintf("re-run run %d", j.Run), byEnd, func(ctx context.Context) error {
		// The job may have ended by itself before the cancel reached it:
		// only one that was cancelled or lost is handed back.
		handBack, err := d.interrupted(ctx, j)
		if err != nil || !handBack {
			result = "" // not a re-run, unless err
			return err
		}
		requested, err := s.rerunRun(ctx, j)
		switch {
		case err != nil:
		case requested:
			result = resultOK
		default:
			result = resultMaxAttempts
		}
		return err
	})
	if err != nil {
		result = resultFailed
	}
}

// interrupted reports whether j's run is to be handed back: ghrunner's
// cancel ended jobs of it, or j was cancelled or stopped rather than
// ending by itself. For the job run.sh ran when the notice came, run.sh
// said how it ended (Canceled when cancelled or stopped mid-way), or it
// was still running when it was stopped; for another, GitHub is asked.
func (d *drain) interrupted(ctx context.Context, j *ghapi.Job) (bool, error) {
	if d.cancelled[j] {
		return true, nil
	}
	if j != d.noticeJob || d.child == nil {
		return d.s.api.Interrupted(ctx, j)
	}
	switch res := d.child.Result(d.started); res {
	case "", "Canceled":
		return true, nil
	default:
		d.s.log.Info("ghrunner: the job ended by itself before it was stopped: its run is not re-run", "job", j, "result", res)
		return false, nil
	}
}

// unregister removes the registration; while GitHub still counts the
// runner busy (its job ending) it is tried again, from 100 ms up to every
// -poll, until ctx ends.
func (s *supervisor) unregister(ctx context.Context) error {
	b := backoff.Backoff{Base: 100 * time.Millisecond, Max: s.cfg.Poll}
	for {
		gone, err := s.api.RemoveRunner(ctx, s.reg.ID)
		if err == nil {
			s.registered.Store(false)
			if gone {
				s.log.Info("ghrunner: the registration was gone already", "runner_id", s.reg.ID)
			}
			return nil
		}
		if !errors.Is(err, ghapi.ErrRunnerBusy) {
			return err
		}
		wait := b.Next()
		s.log.Info("ghrunner: GitHub still counts the runner busy; trying again", "runner_id", s.reg.ID, "in", wait)
		if !backoff.Sleep(ctx, wait) {
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
	}
}

// summary logs the steps and returns the exit status.
func (d *drain) summary() int {
	d.stepsMu.Lock()
	defer d.stepsMu.Unlock()
	var failed, names []string
	for _, s := range d.steps {
		if s.err != nil {
			failed = append(failed, s.name+": "+s.err.Error())
			names = append(names, s.name) // for the webhook: not the API's answers
		}
	}
	d.releaseAll()
	if len(failed) == 0 {
		d.s.log.Info("ghrunner: cleanup done", "t", d.since(), "steps", len(d.steps))
		return ExitOK
	}
	d.s.log.Error("ghrunner: cleanup unfinished", "t", d.since(), "unfinished", strings.Join(failed, "; "))
	d.s.ops.Outcome(d.nt, OutcomeUnfinished, map[string]string{"steps": strings.Join(names, "; ")})
	return ExitDeadline
}

// releaseTimeout bounds the releases after the cleanup, all together:
// Release may retry over the network (Azure's acknowledgement, Auto
// Scaling's CompleteLifecycleAction) for as long as it is let.
const releaseTimeout = 5 * time.Second

// releaseAll tells the sources of the drain's notices, of those of the
// hold it ended, and of the later ones that ghrunner is done: logind's
// delay lock lets the shutdown go on at once, Azure's event starts, an
// Auto Scaling termination hook lets the instance go now rather than at
// the hold's end. They are released side by side, within releaseTimeout.
func (d *drain) releaseAll() {
	if d.s.release == nil {
		return
	}
	d.mu.Lock()
	nts := append(slices.Clone(d.release), d.later...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, nt := range nts {
		wg.Go(func() {
			err := d.s.release(ctx, nt)
			d.s.m.released(err)
			if err != nil {
				d.s.log.Warn("ghrunner: release", "notice", nt, "err", err)
			} else if nt.Held {
				d.s.log.Info("ghrunner: released the hold", "notice", nt)
			}
		})
	}
	wg.Wait()
}
