//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

// register makes r.reg a live registration: after a re-exec it resumes the
// one in the state file; otherwise it settles what an earlier run on this
// host left there (see settleEarlier) and registers anew. It retries until
// -register-timeout (exit 1); an imminent notice meanwhile, held or not,
// ends the runner cleanly, after removing the registration it holds, if
// any.
func (r *runner) register() (code int, ok bool) {
	give := time.Now().Add(r.cfg.registerTimeout)
	wait := 100 * time.Millisecond
	for {
		r.ops.Tick() // a try is a few calls of at most callTimeout, a wait 2 s: no Heartbeat needed
		err := r.tryRegister()
		if r.urgent != nil {
			return r.leaveBeforeRegistering(*r.urgent), false
		}
		if r.holding != nil {
			return r.leaveBeforeRegistering(r.holding.binding()), false
		}
		if err == nil {
			return 0, true
		}
		r.warn("registering", err)
		if time.Now().After(give) {
			r.tl.Printf("could not register within %v: %v; exit %d", r.cfg.registerTimeout, err, exitStartup)
			return exitStartup, false
		}
		t := time.NewTimer(wait)
		select {
		case nt := <-r.notices:
			t.Stop()
			r.notice(nt)
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// tryRegister makes one attempt at what register does.
func (r *runner) tryRegister() error {
	if r.reg.ID != "" && r.reg.ID == r.cfg.resumeID {
		err := r.call(func(ctx context.Context) error { return r.svc.Heartbeat(ctx, r.reg) })
		switch {
		case err == nil:
			r.registered.Store(true)
			r.tl.Printf("resumed registration %s after re-exec", r.reg.ID)
			return nil
		case !errors.Is(err, ErrNotRegistered):
			return fmt.Errorf("resuming registration %s: %w", r.reg.ID, err)
		}
		r.tl.Printf("registration %s is gone (%v); registering anew", r.reg.ID, err)
		r.reg, r.pending, r.cfg.resumeID = Registration{}, nil, ""
		r.save()
	}
	if err := r.settleEarlier(); err != nil {
		return err
	}
	var reg Registration
	err := r.call(func(ctx context.Context) (err error) {
		reg, err = r.svc.Register(ctx, r.cfg.name, r.cfg.labels)
		return err
	})
	if err != nil {
		return fmt.Errorf("registering %q: %w", r.cfg.name, err)
	}
	r.reg = reg // registered as a notice came: leaveBeforeRegistering removes it
	r.registered.Store(true)
	r.save()
	r.tl.Printf("registered as %s", reg.ID)
	return nil
}

// settleEarlier settles what an earlier run on this host left in the state
// file, a runner that did not unregister (killed, crashed, or the CI
// service was down while it drained): it delivers the result that runner
// could not, then removes its registration, which re-queues the job it was
// running, if any.
func (r *runner) settleEarlier() error {
	if r.reg.ID == "" {
		return nil
	}
	if p := r.pending; p != nil {
		dropped, err := r.deliverOnce()
		switch {
		case err != nil:
			return fmt.Errorf("delivering the result of job %s, left by an earlier run: %w", p.Job.ID, err)
		case dropped != nil:
			r.tl.Printf("dropped the result of job %s, left by an earlier run: %v", p.Job.ID, dropped)
		default:
			r.tl.Printf("delivered the result of job %s (%s), left by an earlier run", p.Job.ID, p.Result.Status)
		}
	}
	err := r.call(func(ctx context.Context) error { return r.svc.Remove(ctx, r.reg) })
	if err != nil {
		return fmt.Errorf("removing stale registration %s: %w", r.reg.ID, err)
	}
	r.tl.Printf("removed stale registration %s of %q (left by a runner that did not unregister; its job, if any, is re-queued)", r.reg.ID, r.cfg.name)
	r.reg = Registration{}
	r.save()
	return nil
}

// leaveBeforeRegistering handles an imminent notice that comes before the
// runner is registered: there is nothing to clean up, unless the runner
// holds a registration already (the one it was resuming, one left by an
// earlier run, or one made as the notice came), which it removes as a
// drain does, after delivering the result it may hold. A hold is
// released: with no job to wait for, the host may go now.
func (r *runner) leaveBeforeRegistering(nt termsig.Notice) int {
	switch {
	case r.reg.ID != "" && r.holding != nil:
		return r.endHold()
	case r.reg.ID != "":
		return r.drain(nt)
	case r.holding != nil:
		r.tl.Printf("held before registering: nothing to clean up")
		r.releaseAll(&deadline{at: r.deadlineFrom(nt, time.Now())})
	default:
		r.ops.Acted(nt) // the runner leaves
		r.tl.mark(nt.Observed)
		r.tl.Printf("notice before registering: %v", nt)
	}
	r.tl.Printf("nothing to clean up; exit %d", exitClean)
	return exitClean
}

// reRegister handles a registration that the CI service no longer knows
// (its lease lapsed while the runner was cut off, or someone removed it).
// The CI service has re-queued its job already, so the runner hands the job
// back: it kills its local run at once, so that it does not run beside the
// next one, and drops its result. Then it registers again.
func (r *runner) reRegister() (code int, ok bool) {
	r.lost = false
	if p := r.job; p != nil {
		r.job = nil
		_ = p.group.signal(syscall.SIGKILL)
		res := <-p.done
		r.tl.Printf("job %s stopped (%s): the CI service has re-queued it already", p.job.ID, res.Status)
		r.logSwept(p)
	}
	if p := r.pending; p != nil {
		r.tl.Printf("dropping the result of job %s: the CI service has re-queued it already", p.Job.ID)
		r.m.delivered(p.Requeue, resultGone)
	}
	r.reg, r.pending = Registration{}, nil
	r.save()
	return r.register()
}
