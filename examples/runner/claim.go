//go:build linux

package main

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/termsig/termsig"
)

// settleFor bounds how long the runner waits for its sources' first look
// before it claims its first job.
const settleFor = 5 * time.Second

// advice names one piece of advice: a rebalance recommendation, one
// scheduled event. A Cleared notice names the advice it clears the same
// way.
type advice struct{ source, event string }

// idle reports whether the runner has no job: none running, and no result
// of one waiting to be delivered.
func (r *runner) idle() bool { return r.job == nil && r.pending == nil }

// mayClaim is the rule for taking a new job: only when idle, not while a
// reload waits for the current job, not under a hold (the host is going
// away once the job is done), not while advice is in force, and not
// before every source has had its first look at the host (a metadata
// service answered once, a signal handler or netlink subscription in
// place), so that a host already under notice does not take a job only to
// drain it.
func (r *runner) mayClaim() bool {
	return r.idle() && !r.reload && r.holding == nil && len(r.paused) == 0 && (r.settled || r.ready == nil)
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

// pollOnce makes one attempt to deliver a pending result, and claims a
// job if the runner may. The notices that have come are looked at first:
// the poll timer and a notice can be ready at once, and select picks
// either.
func (r *runner) pollOnce() {
	r.deliverPending()
	if !r.checkNotices() && r.mayClaim() {
		r.claim()
	}
}

// claim asks the CI service for a job and starts it, unless an imminent
// notice came meanwhile: then the job goes back to the queue unstarted.
func (r *runner) claim() {
	var job *Job
	err := r.call(func(ctx context.Context) (err error) {
		job, err = r.svc.Claim(ctx, r.reg)
		return err
	})
	if r.gone(err) {
		return
	}
	r.warn("claiming", err)
	if err != nil || job == nil {
		return
	}
	if r.checkNotices() || r.holding != nil {
		r.tl.Printf("job %s claimed as an imminent notice came: handing it back unstarted", job.ID)
		r.setPending(&pendingReport{Job: *job, Result: Result{ExitCode: -1, Reason: "runner leaving before the job started", Status: "not started"}, Requeue: true})
		return
	}
	p, err := start(job, r.cfg.name, r.cfg.jobEnv, r.cfg.jobUser)
	if err != nil {
		r.tl.Printf("job %s could not start: %v", job.ID, err)
		r.setPending(&pendingReport{Job: *job, Result: Result{ExitCode: -1, Output: err.Error(), Status: "not started"}})
		return
	}
	r.job = p
	r.m.jobStarted()
	r.tl.Printf("job %s started (process group %d): %s", job.ID, p.group.id(), job.Command)
}

// heartbeat tells the CI service that the runner is alive.
func (r *runner) heartbeat() {
	err := r.call(func(ctx context.Context) error { return r.svc.Heartbeat(ctx, r.reg) })
	if !r.gone(err) {
		r.warn("heartbeat", err)
	}
}

// gone reports whether err says that the CI service no longer knows the
// registration, and if so marks it lost: the loop registers again.
func (r *runner) gone(err error) bool {
	if !errors.Is(err, ErrNotRegistered) {
		return false
	}
	r.tl.Printf("registration %s is gone from the CI service: %v", r.reg.ID, err)
	r.lost = true
	r.registered.Store(false)
	return true
}

// finished reports a job that ended by itself. The result is on disk
// before the first try, so that a runner killed before it is delivered
// leaves it to the next start; if the CI service cannot be reached, the
// poll timer tries again (deliverPending).
func (r *runner) finished(res Result) {
	p := r.job
	r.job = nil
	r.logSwept(p)
	r.setPending(&pendingReport{Job: *p.job, Result: res})
	dropped, err := r.deliverOnce()
	switch {
	case err != nil:
		r.tl.Printf("job %s ended: %s; reporting it failed: %v (retrying)", p.job.ID, res.Status, err)
		r.errs["reporting job "+p.job.ID] = err.Error()
	case dropped != nil:
		r.tl.Printf("job %s ended: %s; not reported: %v", p.job.ID, res.Status, dropped)
	default:
		r.tl.Printf("job %s ended: %s; reported", p.job.ID, res.Status)
	}
}

// logSwept logs the processes of p that had left its process group, and
// that the runner killed when the job ended.
func (r *runner) logSwept(p *process) {
	if len(p.swept) > 0 {
		r.tl.Printf("job %s: killed %d process(es) that had left its process group: %v", p.job.ID, len(p.swept), p.swept)
	}
}

// deliverPending makes one attempt to deliver the result that the CI
// service has not taken yet, if there is one.
func (r *runner) deliverPending() {
	p := r.pending
	if p == nil {
		return
	}
	dropped, err := r.deliverOnce()
	if dropped != nil {
		r.tl.Printf("dropping the result of job %s: %v", p.Job.ID, dropped)
	}
	r.warn("reporting job "+p.Job.ID, err)
}

// deliverOnce makes one attempt to deliver the pending result, if there
// is one, in call: an imminent notice cuts it short. It returns a nil err
// once the result is off the runner's hands: taken by the CI service, or
// dropped because the CI service will never take it, which dropped says.
func (r *runner) deliverOnce() (dropped, err error) {
	p := r.pending
	if p == nil {
		return nil, nil
	}
	return r.delivered(r.call(func(ctx context.Context) error { return r.send(ctx, p) }))
}

// send makes one attempt to deliver p. It only talks to the CI service,
// so that it can run in call's goroutine.
func (r *runner) send(ctx context.Context, p *pendingReport) error {
	if p.Requeue {
		return r.svc.Requeue(ctx, r.reg, &p.Job, p.Result)
	}
	return r.svc.Report(ctx, r.reg, &p.Job, p.Result)
}

// delivered takes the outcome of send for the pending result: it is off
// the runner's hands if the CI service took it, or if it will never take
// it (the job or the registration is gone: dropped says why). Either is
// counted, and the first posted as the outcome of the notice the runner
// leaves for, if any.
func (r *runner) delivered(err error) (dropped, _ error) {
	if errors.Is(err, ErrJobGone) || errors.Is(err, ErrNotRegistered) {
		dropped, err = err, nil
	}
	if p := r.pending; err == nil && p != nil {
		r.setPending(nil)
		r.handedBack(p, dropped)
	}
	return dropped, err
}

// checkNotices handles the notices waiting on C without blocking, and
// reports whether an imminent one is in r.urgent: the runner must then
// start nothing, and drain.
func (r *runner) checkNotices() bool {
	for r.urgent == nil {
		select {
		case nt := <-r.notices:
			r.notice(nt)
		default:
			return false
		}
	}
	return true
}

// notice handles one notice taken from C, once it is counted (and posted
// to the webhook): a held termination with a deadline starts or moves a
// hold (see holdFor); any other imminent one, a hard notice or one saying
// that a hold is over, is kept in r.urgent, for the loop to drain at
// once; the others are advice.
func (r *runner) notice(nt termsig.Notice) {
	r.ops.Noticed(nt)
	if nt.Kind.Imminent() {
		switch {
		case r.urgent != nil:
		case nt.Held && !nt.Deadline.IsZero():
			r.holdFor(nt)
		default:
			if r.holding != nil && slices.ContainsFunc(r.holding.notices, func(h termsig.Notice) bool { return sameEvent(h, nt) }) {
				r.tl.Printf("the hold is over (the latest notice of its event is not held): draining now")
			}
			r.urgent = &nt
		}
		return
	}
	r.advise(nt)
}

// advise handles the notices that are not imminent: a reload, and advice,
// which pauses claiming until it is cleared.
func (r *runner) advise(nt termsig.Notice) {
	switch nt.Kind {
	case termsig.Reload:
		r.requestReload(nt)
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
