//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	ossignal "os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

// Exit statuses. systemd counts 0 as a clean stop whatever the cause, so a
// runner that drained and unregistered exits 0 after a platform notice,
// SIGTERM or SIGINT alike (never 143), and Restart=on-failure leaves it
// stopped; every failure is non-zero, so systemd records it and restarts.
const (
	exitClean      = 0 // drained, job re-queued, unregistered
	exitStartup    = 1 // could not register within -register-timeout
	exitUsage      = 2 // bad flags
	exitUnregister = 3 // drained, but could not unregister before the deadline
	exitReexec     = 4 // SIGHUP: the job finished, but re-executing failed
)

// runnerIDEnv carries the registration across a re-exec on SIGHUP.
const runnerIDEnv = "TERMSIG_RUNNER_ID"

type config struct {
	name            string
	labels          []string
	poll            time.Duration // how often to ask for a job when idle
	grace           time.Duration // longest wait for a job after SIGTERM
	margin          time.Duration // kept before the deadline for re-queueing and unregistering
	stopTimeout     time.Duration // the deadline of a notice that has none
	registerTimeout time.Duration
	onAdvice        string // "drain" or "ignore"
	resumeID        string // the registration to keep, after a re-exec
}

type runner struct {
	cfg     config
	svc     CIService
	tl      *timeline
	notices <-chan termsig.Notice
	stop    func()             // stops the sources
	notify  func(state string) // sd_notify
	// ready is closed once every source has had its first look at the
	// host (termsig.Notifier.Ready): the runner claims no job before, for
	// at most settleFor. Nil: do not wait.
	ready <-chan struct{}

	started time.Time
	settled bool

	id      string
	job     *process
	pending *pendingReport            // a result the CI service has not taken yet
	paused  map[advice]termsig.Notice // advice in force, by (source, event)
	reload  bool                      // SIGHUP: finish the job, then re-exec
	errs    map[string]string
}

// advice names one piece of advice: a rebalance recommendation, one
// scheduled event. A Cleared notice names the advice it clears the same
// way.
type advice struct{ source, event string }

type pendingReport struct {
	job *Job
	res Result
}

// run registers, runs jobs until an imminent notice, and returns the exit
// status. It returns only for exits; a reload re-executes the binary.
func (r *runner) run() int {
	r.started = time.Now()
	r.paused = map[advice]termsig.Notice{}
	r.errs = map[string]string{}
	if groups := killLeftovers(r.cfg.name); len(groups) > 0 {
		r.tl.Printf("killed the processes of jobs left running by an earlier runner named %q (process groups %v)", r.cfg.name, groups)
	}
	id, code, ok := r.register()
	if !ok {
		return code
	}
	r.id = id
	r.notify("READY=1")
	r.tl.Printf("ready: runner %s (%s), asking for a job every %v", r.id, r.cfg.name, r.cfg.poll)

	claim := time.NewTimer(0)
	defer claim.Stop()
	settle := time.NewTimer(settleFor)
	defer settle.Stop()
	for {
		// A reload waits for the job and for its result to be reported:
		// the new image knows nothing of either.
		if r.reload && r.job == nil && r.pending == nil {
			return r.restart()
		}
		var claimC <-chan time.Time
		if r.job == nil && (r.pending != nil || r.mayClaim()) {
			claimC = claim.C
		}
		var doneC <-chan Result
		if r.job != nil {
			doneC = r.job.done
		}
		var readyC <-chan struct{}
		var settleC <-chan time.Time
		if !r.settled {
			readyC, settleC = r.ready, settle.C
		}
		select {
		case <-readyC:
			r.settle(true)
			// What the sources saw in their first look is on C by now:
			// a host already under notice must not take a job.
			if nt, ok := r.takeAdvice(); ok {
				return r.drain(nt)
			}
			claim.Reset(0)
		case <-settleC:
			r.settle(false)
			claim.Reset(0)
		case nt := <-r.notices:
			if nt.Kind.Imminent() {
				return r.drain(nt)
			}
			r.advise(nt)
			claim.Reset(0)
		case <-claimC:
			r.claim()
			claim.Reset(r.cfg.poll)
		case res := <-doneC:
			r.finished(res)
			claim.Reset(0)
		}
	}
}

// call runs one request to the CI service with a timeout.
func (r *runner) call(op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return op(ctx)
}

// warn logs err for what once per change, so that a CI service that is down
// does not fill the log with one line per poll.
func (r *runner) warn(what string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if r.errs[what] == msg {
		return
	}
	r.errs[what] = msg
	if err != nil {
		r.tl.Printf("%s failed: %v (retrying)", what, err)
	} else {
		r.tl.Printf("%s works again", what)
	}
}

// register removes stale registrations of this runner's name, left by a
// runner that died without unregistering, and registers. After a re-exec
// it keeps its registration instead. It retries until -register-timeout;
// an imminent notice meanwhile ends the runner cleanly, as there is
// nothing to clean up yet.
func (r *runner) register() (id string, code int, ok bool) {
	give := time.Now().Add(r.cfg.registerTimeout)
	wait := 100 * time.Millisecond
	for {
		id, err := r.tryRegister()
		if err == nil {
			return id, 0, true
		}
		r.warn("registering", err)
		if time.Now().After(give) {
			r.tl.Printf("could not register within %v: %v; exit %d", r.cfg.registerTimeout, err, exitStartup)
			return "", exitStartup, false
		}
		t := time.NewTimer(wait)
		select {
		case nt := <-r.notices:
			t.Stop()
			if nt.Kind.Imminent() {
				return "", r.leaveBeforeRegistering(nt), false
			}
			r.tl.Printf("notice ignored while registering: %v", nt)
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// leaveBeforeRegistering handles an imminent notice that comes before the
// runner is registered: there is nothing to clean up, unless this runner
// was resuming the registration of the image it replaced.
func (r *runner) leaveBeforeRegistering(nt termsig.Notice) int {
	r.tl.mark(nt.Observed)
	r.tl.Printf("notice before registering: %v", nt)
	if r.cfg.resumeID == "" {
		r.tl.Printf("nothing to clean up; exit %d", exitClean)
		return exitClean
	}
	deadline := r.deadlineOf(nt)
	err := retryUntil(deadline, func(ctx context.Context) error { return r.svc.Remove(ctx, r.cfg.resumeID) })
	if err != nil {
		r.tl.Printf("could not unregister runner %s before the deadline: %v; exit %d", r.cfg.resumeID, err, exitUnregister)
		return exitUnregister
	}
	r.tl.Printf("unregistered runner %s; exit %d", r.cfg.resumeID, exitClean)
	return exitClean
}

// deadlineOf returns the notice's deadline, or -stop-timeout after it when
// it has none.
func (r *runner) deadlineOf(nt termsig.Notice) time.Time {
	if nt.Deadline.IsZero() {
		return nt.Observed.Add(r.cfg.stopTimeout)
	}
	return nt.Deadline
}

func (r *runner) tryRegister() (string, error) {
	var ids []string
	err := r.call(func(ctx context.Context) (err error) {
		ids, err = r.svc.Lookup(ctx, r.cfg.name)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("looking up %q: %w", r.cfg.name, err)
	}
	keep := r.cfg.resumeID != "" && slices.Contains(ids, r.cfg.resumeID)
	for _, id := range ids {
		if keep && id == r.cfg.resumeID {
			continue
		}
		if err := r.call(func(ctx context.Context) error { return r.svc.Remove(ctx, id) }); err != nil {
			return "", fmt.Errorf("removing stale registration %s: %w", id, err)
		}
		r.tl.Printf("removed stale registration %s of %q (left by a runner that did not unregister; its job is re-queued)", id, r.cfg.name)
	}
	if keep {
		r.tl.Printf("resumed registration %s after re-exec", r.cfg.resumeID)
		return r.cfg.resumeID, nil
	}
	var id string
	err = r.call(func(ctx context.Context) (err error) {
		id, err = r.svc.Register(ctx, r.cfg.name, r.cfg.labels)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("registering %q: %w", r.cfg.name, err)
	}
	r.tl.Printf("registered as %s", id)
	return id, nil
}

// claim reports a pending result, or else asks for a job and starts it.
func (r *runner) claim() {
	if r.pending != nil {
		p := r.pending
		err := r.call(func(ctx context.Context) error { return r.svc.Report(ctx, r.id, p.job, p.res) })
		if errors.Is(err, ErrJobGone) {
			r.tl.Printf("dropping the result of job %s: %v", p.job.ID, err)
			err = nil
		}
		r.warn("reporting job "+p.job.ID, err)
		if err != nil {
			return
		}
		r.pending = nil
	}
	if !r.mayClaim() {
		return
	}
	var job *Job
	err := r.call(func(ctx context.Context) (err error) {
		job, err = r.svc.Claim(ctx, r.id)
		return err
	})
	r.warn("claiming", err)
	if err != nil || job == nil {
		return
	}
	p, err := start(job, r.cfg.name)
	if err != nil {
		r.tl.Printf("job %s could not start: %v", job.ID, err)
		r.pending = &pendingReport{job, Result{ExitCode: -1, Output: err.Error()}}
		return
	}
	r.job = p
	r.tl.Printf("job %s started (pid %d): %s", job.ID, p.cmd.Process.Pid, job.Command)
}

// settleFor bounds how long the runner waits for its sources' first look
// before it claims its first job.
const settleFor = 5 * time.Second

// takeAdvice handles the notices waiting on C without blocking. It stops
// at the first imminent one and returns it.
func (r *runner) takeAdvice() (termsig.Notice, bool) {
	for {
		select {
		case nt := <-r.notices:
			if nt.Kind.Imminent() {
				return nt, true
			}
			r.advise(nt)
		default:
			return termsig.Notice{}, false
		}
	}
}

// mayClaim is the rule for taking a new job: not while a reload waits for
// the current job, not while advice is in force, and not before every
// source has had its first look at the host (a metadata service answered
// once, a signal handler or netlink subscription in place), so that a host
// already under notice does not take a job only to drain it.
func (r *runner) mayClaim() bool {
	return !r.reload && len(r.paused) == 0 && (r.settled || r.ready == nil)
}

// settle records that the runner stops waiting for its sources' first
// look: they are ready, or settleFor has passed.
func (r *runner) settle(ready bool) {
	r.settled = true
	if ready {
		r.tl.Printf("sources ready")
	} else {
		r.tl.Printf("sources not ready after %v; claiming jobs anyway", settleFor)
	}
}

// finished reports a job that ended by itself.
func (r *runner) finished(res Result) {
	job := r.job.job
	r.job = nil
	err := r.call(func(ctx context.Context) error { return r.svc.Report(ctx, r.id, job, res) })
	if errors.Is(err, ErrJobGone) {
		r.tl.Printf("job %s ended: %s; not reported: %v", job.ID, res.Status, err)
		return
	}
	if err != nil {
		r.tl.Printf("job %s ended: %s; reporting it failed: %v (retrying)", job.ID, res.Status, err)
		r.errs["reporting job "+job.ID] = err.Error()
		r.pending = &pendingReport{job, res}
		return
	}
	r.tl.Printf("job %s ended: %s; reported", job.ID, res.Status)
}

// advise handles the notices that are not imminent.
func (r *runner) advise(nt termsig.Notice) {
	switch nt.Kind {
	case termsig.Reload:
		r.reload = true
		if r.job != nil {
			r.tl.Printf("reload requested (%s): finishing job %s, then re-executing; the registration is kept", nt.Reason, r.job.job.ID)
		}
	case termsig.Rebalance, termsig.Maintenance:
		if r.cfg.onAdvice != "drain" {
			r.tl.Printf("advice ignored (-on-advice=%s): %v", r.cfg.onAdvice, nt)
			return
		}
		r.paused[advice{nt.Source, nt.Event}] = nt
		r.tl.Printf("advice: %v; not claiming new jobs, the current one continues, staying registered", nt)
	case termsig.Cleared:
		a := advice{nt.Source, nt.Event}
		if _, ok := r.paused[a]; !ok {
			r.tl.Printf("notice: %v", nt)
			return
		}
		delete(r.paused, a)
		if len(r.paused) == 0 {
			r.tl.Printf("advice cleared: %v; claiming again", nt)
		} else {
			r.tl.Printf("advice cleared: %v; other advice still holds", nt)
		}
	default:
		r.tl.Printf("notice: %v", nt)
	}
}

// restart re-executes the runner's binary in place (same pid, so systemd
// keeps tracking it), keeping the registration. It returns only if exec
// fails, with a failure status so that systemd restarts the runner rather
// than leaving it dead.
func (r *runner) restart() int {
	exe, err := os.Executable()
	if err == nil {
		r.tl.Printf("re-executing %s, keeping registration %s", exe, r.id)
		r.notify("RELOADING=1")
		// Until the new image installs its handler, a second SIGHUP must
		// not kill the runner: an ignored signal stays ignored across
		// execve, and Go keeps an inherited SIG_IGN for SIGHUP until
		// signal.Notify asks for it. (SIGTERM cannot be carried over that
		// way; a SIGTERM in that instant ends the runner, which is what
		// SIGTERM asks for, and its registration is removed by the next
		// start.)
		ossignal.Ignore(syscall.SIGHUP)
		r.stop()
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, runnerIDEnv+"=") })
		err = syscall.Exec(exe, os.Args, append(env, runnerIDEnv+"="+r.id))
	}
	r.tl.Printf("re-exec failed: %v; exit %d so that systemd restarts the runner", err, exitReexec)
	return exitReexec
}

// drain handles an imminent notice: stop claiming, stop the job (SIGTERM,
// then SIGKILL at min(deadline-margin, now+grace)), re-queue it, unregister
// with retries until the deadline, and return the exit status. A later
// notice with an earlier deadline (on GCE the power button comes first,
// with none, and the metadata server's 30 s a moment later) brings the
// whole plan forward.
func (r *runner) drain(nt termsig.Notice) int {
	r.tl.mark(nt.Observed)
	r.tl.Printf("notice: %v", nt)
	r.notify("STOPPING=1")
	d := &deadline{at: r.deadlineOf(nt)}
	if nt.Deadline.IsZero() {
		r.tl.Printf("no deadline in the notice: using -stop-timeout, %v", r.cfg.stopTimeout)
	} else {
		r.tl.Printf("deadline in %v", fmtDur(time.Until(d.get())))
	}
	stopExtending := r.extendTimeout(d)
	defer stopExtending()

	r.tl.Printf("stopped claiming jobs")
	if r.job != nil {
		r.stopJob(nt, d)
	}
	if r.pending != nil {
		p := r.pending
		err := retryUntil(d.get().Add(-r.cfg.margin/2), func(ctx context.Context) error {
			if err := r.svc.Report(ctx, r.id, p.job, p.res); !errors.Is(err, ErrJobGone) {
				return err
			}
			return nil
		})
		if err != nil {
			r.tl.Printf("could not report job %s: %v", p.job.ID, err)
		}
	}

	err := retryUntil(d.get(), func(ctx context.Context) error { return r.svc.Remove(ctx, r.id) })
	if err != nil {
		r.tl.Printf("could not unregister runner %s before the deadline: %v; exit %d (the next start of a runner named %q removes the stale registration)", r.id, err, exitUnregister, r.cfg.name)
		return exitUnregister
	}
	r.tl.Printf("unregistered runner %s, %v before the deadline", r.id, fmtDur(time.Until(d.get())))
	r.tl.Printf("summary: %s; notice to unregistered %v; exit %d", nt, fmtDur(r.tl.since()), exitClean)
	return exitClean
}

// A deadline is the time the drain must be done by. It only moves
// earlier. It is read by the goroutine that extends systemd's timeout.
type deadline struct {
	mu sync.Mutex
	at time.Time
}

func (d *deadline) get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// tighten moves the deadline to t if t is earlier, and reports whether it
// did.
func (d *deadline) tighten(t time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t.IsZero() || !t.Before(d.at) {
		return false
	}
	d.at = t
	return true
}

// stopJob ends the running job for a drain and re-queues it.
func (r *runner) stopJob(nt termsig.Notice, d *deadline) {
	p := r.job
	r.job = nil
	// A job that ended just before the notice ended by itself.
	select {
	case res := <-p.done:
		r.tl.Printf("job %s had ended: %s", p.job.ID, res.Status)
		r.pending = &pendingReport{p.job, res}
		return
	default:
	}

	grace := time.Now().Add(r.cfg.grace)
	killAt := func() time.Time {
		if byDeadline := d.get().Add(-r.cfg.margin); byDeadline.Before(grace) {
			return byDeadline
		}
		return grace
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		r.tl.Printf("SIGTERM to job %s: %v", p.job.ID, err)
	}
	r.tl.Printf("sent SIGTERM to job %s (process group %d); SIGKILL in %v", p.job.ID, p.cmd.Process.Pid, fmtDur(time.Until(killAt())))
	kill := time.NewTimer(time.Until(killAt()))
	defer kill.Stop()
	var res Result
wait:
	for {
		select {
		case res = <-p.done:
			break wait
		case <-kill.C:
			r.tl.Printf("job %s still running: SIGKILL", p.job.ID)
			_ = p.signal(syscall.SIGKILL)
		case more := <-r.notices:
			switch {
			case more.Kind == termsig.Interrupt:
				r.tl.Printf("second interrupt (%s): SIGKILL job %s now", more.Reason, p.job.ID)
				_ = p.signal(syscall.SIGKILL)
			case more.Kind.Imminent() && d.tighten(more.Deadline):
				r.tl.Printf("notice: %v; the deadline is now in %v, SIGKILL in %v", more, fmtDur(time.Until(d.get())), fmtDur(time.Until(killAt())))
				kill.Reset(time.Until(killAt()))
			default:
				r.tl.Printf("notice while draining: %v", more)
			}
		}
	}
	r.tl.Printf("job %s ended: %s", p.job.ID, res.Status)

	// The job did not choose to end: whatever its status, it is re-queued.
	res.Reason = "runner leaving: " + nt.String()
	err := retryUntil(d.get().Add(-r.cfg.margin/2), func(ctx context.Context) error {
		err := r.svc.Requeue(ctx, r.id, p.job, res)
		if errors.Is(err, ErrJobGone) {
			r.tl.Printf("job %s is no longer this runner's: %v", p.job.ID, err)
			return nil
		}
		return err
	})
	if err != nil {
		r.tl.Printf("could not re-queue job %s: %v (unregistering the runner re-queues it too)", p.job.ID, err)
		return
	}
	r.tl.Printf("job %s re-queued", p.job.ID)
}

// extendTimeout keeps telling systemd, while the runner drains, that it
// needs until the deadline (EXTEND_TIMEOUT_USEC), so that TimeoutStopSec
// does not cut the drain short. It returns a function that stops it.
func (r *runner) extendTimeout(d *deadline) func() {
	done := make(chan struct{})
	ended := make(chan struct{})
	send := func() {
		left := max(time.Until(d.get()), 0) + 5*time.Second
		r.notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", left.Microseconds()))
	}
	go func() {
		defer close(ended)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		send()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				send()
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// retryUntil calls op until it succeeds or the deadline passes, with
// backoff, each call bounded so that the last one ends by the deadline. It
// always makes one attempt, even past the deadline: a deadline is an
// estimate (the host often outlives a spot notice's time), and one more
// request costs nothing.
func retryUntil(deadline time.Time, op func(context.Context) error) error {
	const floor = 2 * time.Second // the least time one attempt gets
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), max(min(time.Until(deadline), floor), floor/2))
		err := op(ctx)
		cancel()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("deadline passed; last error: %w", err)
		}
		t := time.NewTimer(min(wait, left))
		<-t.C
		wait = min(2*wait, time.Second)
	}
}
