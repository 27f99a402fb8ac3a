//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/backoff"
)

// A drain is the cleanup after an imminent notice. It runs in a goroutine
// of its own, so that a later notice can still bring its end forward.
type drain struct {
	g     *ghrunner
	nt    termsig.Notice
	child *child // nil when the notice came before run.sh started
	busy  bool   // run.sh said it runs a job
	// started is how many jobs run.sh had said it took when the drain
	// began: the job looked up when it started is known for that count.
	started   int
	killed    bool    // run.sh had to be killed
	noticeJob *jobRef // the job found, when run.sh said it ran one at the notice
	done      chan int

	mu    sync.Mutex
	later []termsig.Notice // the imminent notices that came during the drain
	end   time.Time        // all steps end by then: the deadline minus the margin
	spare time.Duration    // kept after run.sh's SIGKILL for re-running and removing
	// endCtx ends at end, earlyCtx at end minus spare (when run.sh gets
	// SIGKILL); their timers move when the end does.
	endCtx, earlyCtx     movingDeadline
	endTimer, earlyTimer *time.Timer

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
)

// A movingDeadline is a context whose deadline is the drain's end (or
// kill time) as it is now, so that a call that waits (a rate limit) can
// tell whether it would still end in time; timers cancel it.
type movingDeadline struct {
	context.Context
	at func() time.Time
}

func (m movingDeadline) Deadline() (time.Time, bool) { return m.at(), true }

func (g *ghrunner) startDrain(nt termsig.Notice) {
	d := &drain{g: g, nt: nt, child: g.child, done: make(chan int, 1)}
	if d.child != nil {
		d.busy, _, _ = d.child.state()
		d.started = d.child.jobsStarted()
	}
	d.end = g.endOf(nt)
	d.spare = min(maxSpare, time.Until(d.end)/3)
	endCtx, cancelEnd := context.WithCancelCause(context.Background())
	earlyCtx, cancelEarly := context.WithCancelCause(endCtx)
	d.endCtx = movingDeadline{endCtx, func() time.Time { end, _ := d.times(); return end }}
	d.earlyCtx = movingDeadline{earlyCtx, func() time.Time { end, spare := d.times(); return end.Add(-spare) }}
	d.endTimer = time.AfterFunc(time.Until(d.end), func() { cancelEnd(errDeadline) })
	d.earlyTimer = time.AfterFunc(time.Until(d.end.Add(-d.spare)), func() {
		cancelEarly(errKillTime)
	})
	g.log.Warn("ghrunner: cleanup", "end_in", time.Until(d.end).Round(time.Millisecond), "kill_in", time.Until(d.end.Add(-d.spare)).Round(time.Millisecond))
	g.drain = d
	go func() {
		defer cancelEnd(nil)
		defer d.stopTimers()
		d.done <- d.run()
	}()
}

// endOf is when the cleanup after nt must be done: its deadline (at most
// -stop-timeout after it was seen; that without a deadline) minus the
// margin, but at least minDrain from now.
func (g *ghrunner) endOf(nt termsig.Notice) time.Time {
	seen := nt.Observed
	if seen.IsZero() {
		seen = time.Now()
	}
	dl := seen.Add(g.o.stopTimeout)
	if !nt.Deadline.IsZero() && nt.Deadline.Before(dl) {
		dl = nt.Deadline
	}
	return later(dl.Add(-g.o.margin), time.Now().Add(minDrain))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// tighten brings the end forward for a later notice with an earlier
// deadline (on GCE the power button comes without one, the metadata
// server's preemption a moment later with 30 s).
func (d *drain) tighten(nt termsig.Notice) {
	end := d.g.endOf(nt)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.later = append(d.later, nt)
	if !end.Before(d.end) {
		d.g.log.Info("ghrunner: another imminent notice; the end stays", "notice", nt, "end_in", time.Until(d.end).Round(time.Millisecond))
		return
	}
	d.end = end
	d.spare = min(d.spare, time.Until(end)/3)
	d.endTimer.Reset(time.Until(end))
	d.earlyTimer.Reset(time.Until(end.Add(-d.spare)))
	d.g.log.Warn("ghrunner: an earlier deadline: the cleanup's end moves forward", "notice", nt, "end_in", time.Until(end).Round(time.Millisecond))
}

func (d *drain) stopTimers() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endTimer.Stop()
	d.earlyTimer.Stop()
}

// do runs one step and records it.
func (d *drain) do(name string, f func() error) error {
	start := time.Now()
	err := f()
	d.record(step{name: name, took: time.Since(start), err: err})
	attrs := []any{"step", name, "took", time.Since(start).Round(time.Millisecond), "t", d.since()}
	if err != nil {
		d.g.log.Error("ghrunner: step failed", append(attrs, "err", err)...)
	} else {
		d.g.log.Info("ghrunner: step done", attrs...)
	}
	return err
}

// supersede forgets the failure of step name: a later step did its work.
func (d *drain) supersede(name string) {
	d.stepsMu.Lock()
	defer d.stepsMu.Unlock()
	for i := range d.steps {
		if d.steps[i].name == name && d.steps[i].err != nil {
			d.g.log.Info("ghrunner: a failed step's work was done by a later one", "step", name)
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
	g := d.g
	var jobs []*jobRef // the jobs to hand back
	j := d.findJob()
	if d.busy {
		d.noticeJob = j // run.sh's job when the notice came
	}
	if j != nil {
		_ = d.do(fmt.Sprintf("cancel run %d", j.run), func() error { return d.cancelRun(j) })
		jobs = append(jobs, j)
	}
	lost := false // run.sh was stopped in a job that was not found
	if d.child != nil {
		_ = d.do("stop run.sh", d.stopChild)
		jobs, lost = d.afterStop(j, jobs)
	}
	var wg sync.WaitGroup
	switch {
	case g.reg == nil:
	case lost:
		d.record(step{
			name: fmt.Sprintf("remove the registration of runner %d", g.reg.ID),
			err:  fmt.Errorf("kept, so that the next start of a runner named %q re-runs the job run.sh was interrupted in, which was not found", g.o.name),
		})
	default:
		wg.Go(func() { _ = d.do(fmt.Sprintf("remove the registration of runner %d", g.reg.ID), d.unregister) })
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
func (d *drain) afterStop(j *jobRef, jobs []*jobRef) ([]*jobRef, bool) {
	last := d.child.jobsStarted()
	res := d.child.result(last)
	stoppedIn := (last > d.started || d.busy) && (res == "" || res == "Canceled")
	seq := d.started
	if !d.busy {
		seq++
	}
	if j == nil && !stoppedIn {
		d.supersede("find the runner's job") // it had no job to hand back
	}
	if d.g.reg == nil || !stoppedIn || (j != nil && last == seq) {
		return jobs, false
	}
	late := d.interruptedJob()
	switch {
	case late == nil:
		return jobs, true
	case j != nil && late.run == j.run:
		jobs[0] = late // one re-run per run, for the job that was stopped
	default:
		jobs = append(jobs, late)
	}
	d.supersede("find the runner's job")
	return jobs, false
}

// findJob returns the job run.sh runs: the one looked up when it started,
// or else what the API says now.
func (d *drain) findJob() *jobRef {
	g := d.g
	if g.reg == nil || d.child == nil {
		return nil
	}
	if j := g.known.get(d.child, d.started); j != nil && d.busy {
		g.log.Info("ghrunner: the runner's job, looked up when it started", "job", j)
		return j
	}
	var j *jobRef
	_ = d.do("find the runner's job", func() (err error) {
		j, err = g.api.findJob(d.earlyCtx, g.reg.ID, d.busy)
		if err == nil {
			g.log.Info("ghrunner: the runner's job", "job", jobOrNone(j))
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
func (d *drain) interruptedJob() *jobRef {
	g := d.g
	var j *jobRef
	err := d.do("find the job run.sh was stopped in", func() (err error) {
		j, err = g.api.interruptedJob(d.earlyCtx, g.reg.ID)
		if err == nil && j == nil {
			err = errors.New("run.sh said it ran a job, but GitHub shows none")
		}
		return err
	})
	if err != nil {
		return nil
	}
	g.log.Info("ghrunner: the job run.sh was stopped in", "job", j)
	if d.do(fmt.Sprintf("cancel run %d", j.run), func() error { return d.cancelRun(j) }) != nil {
		return nil
	}
	return j
}

// cancelRun cancels j's run; one that has completed needs none. When
// GitHub accepts the cancel, the run had jobs left to run, which the cancel
// ends: the run is then handed back whatever became of j.
func (d *drain) cancelRun(j *jobRef) error {
	err := d.g.api.cancel(d.earlyCtx, j.repo, j.run)
	switch {
	case alreadyCompleted(err):
		return nil
	case err == nil:
		j.cancelled = true
	}
	return err
}

func jobOrNone(j *jobRef) string {
	if j == nil {
		return "none"
	}
	return j.String()
}

// stopChild interrupts run.sh's process group and waits for run.sh to
// exit, killing the group at the early end.
func (d *drain) stopChild() error {
	if err := d.child.interrupt(); err != nil {
		d.g.log.Warn("ghrunner: cannot interrupt run.sh", "err", err)
	}
	// Past the kill time already, run.sh still gets a moment to hand its
	// job back before SIGKILL.
	grace := time.NewTimer(min(stopGrace, time.Until(d.endCtx.at())))
	defer grace.Stop()
	select {
	case <-d.child.done:
		d.g.log.Info("ghrunner: run.sh exited", "status", d.child.status)
		return nil
	case <-grace.C:
	}
	select {
	case <-d.child.done:
		d.g.log.Info("ghrunner: run.sh exited", "status", d.child.status)
		return nil
	case <-d.earlyCtx.Done():
	}
	d.g.log.Warn("ghrunner: run.sh is still running at its kill time: SIGKILL to its process group", "pgid", d.child.pid)
	d.child.kill()
	d.killed = true
	select {
	case <-d.child.done:
		return fmt.Errorf("run.sh did not stop when interrupted; killed (status %d)", d.child.status)
	case <-d.endCtx.Done():
		return fmt.Errorf("run.sh did not exit even when killed: %w", context.Cause(d.endCtx))
	}
}

// rerun waits for j's run to complete and re-runs it. When run.sh had
// to be killed, its listener could not tell GitHub that the job ended:
// the run is force-cancelled, or it would wait for the lost runner; that
// and the wait take half the spare time left after the kill.
func (d *drain) rerun(j *jobRef) {
	g := d.g
	var waitCtx context.Context = d.earlyCtx
	if d.killed {
		end, spare := d.times()
		ctx, cancel := context.WithDeadline(d.endCtx, end.Add(-spare/2))
		defer cancel()
		waitCtx = ctx
		err := d.do(fmt.Sprintf("force-cancel run %d", j.run), func() error {
			err := g.api.forceCancel(waitCtx, j.repo, j.run)
			if alreadyCompleted(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return
		}
	}
	if d.do(fmt.Sprintf("wait for run %d to complete", j.run), func() error { return g.waitCompleted(waitCtx, j) }) != nil {
		d.record(step{name: fmt.Sprintf("re-run run %d", j.run), err: errors.New("not tried: the run has not completed")})
		return
	}
	_ = d.do(fmt.Sprintf("re-run run %d", j.run), func() error {
		// The job may have ended by itself before the cancel reached it:
		// only one that was cancelled or lost is handed back.
		if handBack, err := d.interrupted(j); err != nil || !handBack {
			return err
		}
		return g.rerunRun(d.endCtx, j)
	})
}

// interrupted reports whether j's run is to be handed back: ghrunner's
// cancel ended jobs of it, or j was cancelled or stopped rather than
// ending by itself. For the job run.sh ran when the notice came, run.sh
// said how it ended (Canceled when cancelled or stopped mid-way), or it
// was still running when it was stopped; for another, GitHub is asked.
func (d *drain) interrupted(j *jobRef) (bool, error) {
	if j.cancelled {
		return true, nil
	}
	if j != d.noticeJob || d.child == nil {
		return d.g.api.interrupted(d.endCtx, j)
	}
	switch res := d.child.result(d.started); res {
	case "", "Canceled":
		return true, nil
	default:
		d.g.log.Info("ghrunner: the job ended by itself before it was stopped: its run is not re-run", "job", j, "result", res)
		return false, nil
	}
}

// times returns the end and the spare.
func (d *drain) times() (time.Time, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.end, d.spare
}

// unregister removes the registration by the end.
func (d *drain) unregister() error { return d.g.unregister(d.endCtx) }

// unregister removes the registration; while GitHub still counts the
// runner busy (its job ending) it is tried again, from 100 ms up to every
// -poll, until ctx ends.
func (g *ghrunner) unregister(ctx context.Context) error {
	b := backoff.Backoff{Base: 100 * time.Millisecond, Max: g.o.poll}
	for {
		gone, err := g.api.removeRunner(ctx, g.reg.ID)
		if err == nil {
			if gone {
				g.log.Info("ghrunner: the registration was gone already", "runner_id", g.reg.ID)
			}
			return nil
		}
		if !stillBusy(err) {
			return err
		}
		wait := b.Next()
		g.log.Info("ghrunner: GitHub still counts the runner busy; trying again", "runner_id", g.reg.ID, "in", wait)
		if !backoff.Sleep(ctx, wait) {
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
	}
}

// summary logs the steps and returns the exit status.
func (d *drain) summary() int {
	d.stepsMu.Lock()
	defer d.stepsMu.Unlock()
	var failed []string
	for _, s := range d.steps {
		if s.err != nil {
			failed = append(failed, s.name+": "+s.err.Error())
		}
	}
	d.release()
	if len(failed) == 0 {
		d.g.log.Info("ghrunner: cleanup done", "t", d.since(), "steps", len(d.steps))
		return exitOK
	}
	d.g.log.Error("ghrunner: cleanup unfinished", "t", d.since(), "unfinished", strings.Join(failed, "; "))
	return exitDeadline
}

// release tells the sources of the notice and of the later ones that
// ghrunner is done (logind's delay lock lets the shutdown go on at once;
// Azure's event starts).
func (d *drain) release() {
	if d.g.release == nil {
		return
	}
	d.mu.Lock()
	nts := append([]termsig.Notice{d.nt}, d.later...)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, nt := range nts {
		if err := d.g.release(ctx, nt); err != nil {
			d.g.log.Warn("ghrunner: release", "notice", nt, "err", err)
		}
	}
}
