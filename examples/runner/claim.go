//go:build linux

package main

import (
	"context"
	"errors"
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

// A pendingReport is the result of a job that the CI service has not
// taken yet. The runner claims nothing until it is delivered: the CI
// service gives a runner one job at a time, and still counts this one.
type pendingReport struct {
	job *Job
	res Result
}

// idle reports whether the runner has no job: none running, and no result
// of one waiting to be delivered.
func (r *runner) idle() bool { return r.job == nil && r.pending == nil }

// mayClaim is the rule for taking a new job: only when idle, not while a
// reload waits for the current job, not while advice is in force, and not
// before every source has had its first look at the host (a metadata
// service answered once, a signal handler or netlink subscription in
// place), so that a host already under notice does not take a job only to
// drain it.
func (r *runner) mayClaim() bool {
	return r.idle() && !r.reload && len(r.paused) == 0 && (r.settled || r.ready == nil)
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

// claim asks the CI service for a job and starts it.
func (r *runner) claim() {
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
	r.tl.Printf("job %s started (process group %d): %s", job.ID, p.group.id(), job.Command)
}

// finished reports a job that ended by itself. If the CI service cannot
// be reached, the result is kept for deliverPending.
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

// deliverPending makes one attempt to report the result that the CI
// service has not taken yet, if there is one. A result for a job that is no
// longer this runner's can never be delivered, and is dropped.
func (r *runner) deliverPending() {
	p := r.pending
	if p == nil {
		return
	}
	err := r.call(func(ctx context.Context) error { return r.svc.Report(ctx, r.id, p.job, p.res) })
	if errors.Is(err, ErrJobGone) {
		r.tl.Printf("dropping the result of job %s: %v", p.job.ID, err)
		err = nil
	}
	r.warn("reporting job "+p.job.ID, err)
	if err == nil {
		r.pending = nil
	}
}

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
