//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

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
		r.deliverPendingBy(d.get().Add(-r.cfg.margin / 2))
	}
	return r.unregister(nt, d)
}

// deadlineOf returns the notice's deadline, or -stop-timeout after it when
// it has none.
func (r *runner) deadlineOf(nt termsig.Notice) time.Time {
	if nt.Deadline.IsZero() {
		return nt.Observed.Add(r.cfg.stopTimeout)
	}
	return nt.Deadline
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
	res := r.killJob(p, d)
	r.tl.Printf("job %s ended: %s", p.job.ID, res.Status)
	// The job did not choose to end: whatever its status, it is re-queued.
	res.Reason = "runner leaving: " + nt.String()
	r.requeue(p.job, res, d)
}

// killJob sends SIGTERM to the job's process group and waits for the job
// to end. At min(deadline-margin, now+grace) it sends SIGKILL; a second
// interrupt sends it at once, and a later notice with an earlier deadline
// brings it forward.
func (r *runner) killJob(p *process, d *deadline) Result {
	grace := time.Now().Add(r.cfg.grace)
	killAt := func() time.Time {
		if byDeadline := d.get().Add(-r.cfg.margin); byDeadline.Before(grace) {
			return byDeadline
		}
		return grace
	}
	if err := p.group.signal(syscall.SIGTERM); err != nil {
		r.tl.Printf("SIGTERM to job %s: %v", p.job.ID, err)
	}
	r.tl.Printf("sent SIGTERM to job %s (process group %d); SIGKILL in %v", p.job.ID, p.group.id(), fmtDur(time.Until(killAt())))
	kill := time.NewTimer(time.Until(killAt()))
	defer kill.Stop()
	for {
		select {
		case res := <-p.done:
			return res
		case <-kill.C:
			r.tl.Printf("job %s still running: SIGKILL", p.job.ID)
			_ = p.group.signal(syscall.SIGKILL)
		case more := <-r.notices:
			switch {
			case more.Kind == termsig.Interrupt:
				r.tl.Printf("second interrupt (%s): SIGKILL job %s now", more.Reason, p.job.ID)
				_ = p.group.signal(syscall.SIGKILL)
			case more.Kind.Imminent() && d.tighten(more.Deadline):
				r.tl.Printf("notice: %v; the deadline is now in %v, SIGKILL in %v", more, fmtDur(time.Until(d.get())), fmtDur(time.Until(killAt())))
				kill.Reset(time.Until(killAt()))
			default:
				r.tl.Printf("notice while draining: %v", more)
			}
		}
	}
}

// requeue reports a job the runner stopped as interrupted, so that the CI
// service runs it again, retrying until half the margin before the
// deadline.
func (r *runner) requeue(job *Job, res Result, d *deadline) {
	err := retryUntil(d.get().Add(-r.cfg.margin/2), func(ctx context.Context) error {
		err := r.svc.Requeue(ctx, r.id, job, res)
		if errors.Is(err, ErrJobGone) {
			r.tl.Printf("job %s is no longer this runner's: %v", job.ID, err)
			return nil
		}
		return err
	})
	if err != nil {
		r.tl.Printf("could not re-queue job %s: %v (unregistering the runner re-queues it too)", job.ID, err)
		return
	}
	r.tl.Printf("job %s re-queued", job.ID)
}

// deliverPendingBy reports the result the CI service has not taken yet,
// retrying until by.
func (r *runner) deliverPendingBy(by time.Time) {
	p := r.pending
	err := retryUntil(by, func(ctx context.Context) error {
		if err := r.svc.Report(ctx, r.id, p.job, p.res); !errors.Is(err, ErrJobGone) {
			return err
		}
		return nil
	})
	if err != nil {
		r.tl.Printf("could not report job %s: %v", p.job.ID, err)
	}
}

// unregister removes the runner's registration, retrying until the
// deadline, and returns the exit status.
func (r *runner) unregister(nt termsig.Notice, d *deadline) int {
	err := retryUntil(d.get(), func(ctx context.Context) error { return r.svc.Remove(ctx, r.id) })
	if err != nil {
		r.tl.Printf("could not unregister runner %s before the deadline: %v; exit %d (the next start of a runner named %q removes the stale registration)", r.id, err, exitUnregister, r.cfg.name)
		return exitUnregister
	}
	r.tl.Printf("unregistered runner %s, %v before the deadline", r.id, fmtDur(time.Until(d.get())))
	r.tl.Printf("summary: %s; notice to unregistered %v; exit %d", nt, fmtDur(r.tl.since()), exitClean)
	return exitClean
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
