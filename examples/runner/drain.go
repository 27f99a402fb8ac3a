//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/termsig/termsig"
)

// drain handles an imminent notice: stop claiming, stop the job (SIGTERM,
// then SIGKILL at min(deadline-margin, now+grace)), deliver its result (re-
// queue it, or report it if it finished by itself), unregister, and return
// the exit status. A later notice with an earlier deadline (on GCE the
// power button comes first, with none, and the metadata server's 30 s a
// moment later) brings the SIGKILL forward.
//
// Under a hold (a hard notice came, or the hold is over) the timeline
// counts from the first held notice, and the held notices are released
// with this one.
func (r *runner) drain(nt termsig.Notice) int {
	if r.holding == nil {
		r.tl.mark(nt.Observed)
	}
	r.tl.Printf("notice: %v", nt)
	r.keepDrained(nt)
	if r.holding == nil {
		r.notify("STOPPING=1") // a hold said it already
	}
	d := &deadline{at: r.deadlineOf(nt)}
	switch {
	case nt.Deadline.IsZero():
		r.tl.Printf("no deadline in the notice: using -stop-timeout, %v", r.cfg.stopTimeout)
	case !d.get().Equal(nt.Deadline):
		r.tl.Printf("the notice's deadline %s is further than -stop-timeout (%v): using that", nt.Deadline.UTC().Format(time.RFC3339), r.cfg.stopTimeout)
	default:
		r.tl.Printf("deadline in %v", fmtDur(time.Until(d.get())))
	}
	stopExtending := r.extendTimeout(d)
	defer stopExtending()

	if r.holding == nil {
		r.tl.Printf("stopped claiming jobs")
	}
	r.ops.Acted(nt) // claiming has stopped; the job's SIGTERM comes next
	if r.job != nil {
		r.stopJob(nt, d)
	}
	return r.leave(nt, d)
}

// keepDrained adds nt to the notices to release once the runner has left,
// in place of an earlier notice of the same event: a held one is sent
// again each time its hold moves, and released once, with the latest.
func (r *runner) keepDrained(nt termsig.Notice) {
	if i := slices.IndexFunc(r.drained, func(d termsig.Notice) bool { return sameEvent(d, nt) }); i >= 0 {
		r.drained[i] = nt
		return
	}
	r.drained = append(r.drained, nt)
}

// deadlineOf returns the notice's deadline, but at most -stop-timeout
// after the notice was seen: that is the deadline of a notice that has
// none, and it bounds one that is absurdly far (a metadata service that
// answers with the year 9999), which would keep the runner, and systemd
// waiting for it, for ever.
func (r *runner) deadlineOf(nt termsig.Notice) time.Time {
	seen := nt.Observed
	if seen.IsZero() {
		seen = time.Now()
	}
	return r.deadlineFrom(nt, seen)
}

// deadlineFrom is deadlineOf for a notice taken at seen rather than when
// it came: the end of a hold drains from then.
func (r *runner) deadlineFrom(nt termsig.Notice, seen time.Time) time.Time {
	latest := seen.Add(r.cfg.stopTimeout)
	if nt.Deadline.IsZero() || nt.Deadline.After(latest) {
		return latest
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

// stopJob ends the running job for a drain and sets the result to
// deliver: the job is re-queued, unless it ended by itself, before the
// notice or with success during the grace period.
func (r *runner) stopJob(nt termsig.Notice, d *deadline) {
	p := r.job
	r.job = nil
	select {
	case res := <-p.done:
		r.tl.Printf("job %s had ended: %s", p.job.ID, res.Status)
		r.logSwept(p)
		r.setPending(&pendingReport{Job: *p.job, Result: res})
		return
	default:
	}
	res := r.killJob(p, d)
	r.tl.Printf("job %s ended: %s", p.job.ID, res.Status)
	r.logSwept(p)
	if res.ExitCode == 0 {
		// It exited 0 during the grace period: it did its work, and is
		// taken at its word rather than run again.
		r.tl.Printf("job %s succeeded during the grace period: reporting it, not re-queueing it", p.job.ID)
		r.setPending(&pendingReport{Job: *p.job, Result: res})
		return
	}
	// Any other end may be the signal's doing: the job is re-queued.
	res.Reason = "runner leaving: " + nt.String()
	r.setPending(&pendingReport{Job: *p.job, Result: res, Requeue: true})
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
	defer r.beatWhileDraining()()
	for {
		r.ops.Tick() // the grace period may outlast /healthz's staleness
		select {
		case <-r.ops.Heartbeat():
		case res := <-p.done:
			return res
		case <-kill.C:
			r.tl.Printf("job %s still running: SIGKILL", p.job.ID)
			_ = p.group.signal(syscall.SIGKILL)
		case more := <-r.notices:
			r.ops.Noticed(more)
			if more.Kind.Imminent() {
				r.keepDrained(more) // released with the first
			}
			switch {
			case more.Kind == termsig.Interrupt:
				r.tl.Printf("second interrupt (%s): SIGKILL job %s now", more.Reason, p.job.ID)
				_ = p.group.signal(syscall.SIGKILL)
				r.ops.Acted(more)
			case more.Kind.Imminent() && !more.Deadline.IsZero() && d.tighten(r.deadlineOf(more)):
				r.tl.Printf("notice: %v; the deadline is now in %v, SIGKILL in %v", more, fmtDur(time.Until(d.get())), fmtDur(time.Until(killAt())))
				kill.Reset(time.Until(killAt()))
				r.ops.Acted(more)
			default:
				r.tl.Printf("notice while draining: %v", more)
			}
		}
	}
}

// beatWhileDraining keeps the runner's lease alive while its job takes
// its grace period, which may be longer than the lease: otherwise the
// registry would re-queue the job, and another runner run it, while this
// one still does. The heartbeats run in the background, each with a
// short timeout, so that a hung registry does not hold the drain up. The
// returned function ends them and waits for the one under way.
func (r *runner) beatWhileDraining() (stop func()) {
	every := r.beatEvery()
	if every <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			bctx, bcancel := context.WithTimeout(ctx, min(every, 2*time.Second))
			if err := r.svc.Heartbeat(bctx, r.reg); err != nil && ctx.Err() == nil {
				r.tl.Printf("heartbeat while draining: %v", err)
			}
			bcancel()
		}
	})
	return func() { cancel(); wg.Wait() }
}

// leave delivers the result the CI service has not taken yet (a job to
// re-queue, or one that ended by itself), then unregisters, retrying both
// until a quarter of the margin before the deadline, and returns the exit
// status. The result goes first: unregistering would re-queue a job that
// has finished. If the CI service cannot be reached until then, both stay
// in the state file for the next start on this host.
func (r *runner) leave(nt termsig.Notice, d *deadline) int {
	r.leaving = &nt
	until := d.get().Add(-r.cfg.margin / 4)
	err := retryUntil(until, func(ctx context.Context) error {
		r.ops.Tick() // an attempt and its wait take at most 3 s
		if p := r.pending; p != nil {
			dropped, err := r.delivered(r.send(ctx, p))
			switch {
			case err != nil:
				return err
			case dropped != nil:
				r.tl.Printf("job %s is no longer this runner's: %v", p.Job.ID, dropped)
			case p.Requeue:
				r.tl.Printf("job %s re-queued", p.Job.ID)
			default:
				r.tl.Printf("job %s reported: %s", p.Job.ID, p.Result.Status)
			}
		}
		return r.svc.Remove(ctx, r.reg)
	})
	if err != nil {
		r.tl.Printf("could not unregister runner %s before the deadline: %v; exit %d (the next start on this host removes the registration; elsewhere its lease lapses)", r.reg.ID, err, exitUnregister)
		if p := r.pending; p != nil {
			r.m.delivered(p.Requeue, resultFailed)
		}
		r.m.unregistered(resultFailed)
		r.ops.Outcome(nt, outcomeLeftRegistered, map[string]string{"runner_id": r.reg.ID})
		return exitUnregister
	}
	id := r.reg.ID
	r.reg = Registration{}
	r.registered.Store(false)
	r.save()
	r.tl.Printf("unregistered runner %s, %v before the deadline", id, fmtDur(time.Until(d.get())))
	r.m.unregistered(resultOK)
	r.ops.Outcome(nt, outcomeUnregistered, map[string]string{"runner_id": id})
	r.releaseAll(d)
	r.tl.Printf("summary: %s; notice to unregistered %v; exit %d", nt, fmtDur(r.tl.since()), exitClean)
	return exitClean
}

// releaseAll tells the sources of the drained notices that the runner is
// done with them: the work is handed back and the runner unregistered.
// For logind this closes the delay lock, so that the shutdown goes on now
// instead of when the lock's time is up; for sources that hold nothing it
// does nothing. Each gets until the drain's deadline, and at least a
// second. (The exit releases logind's lock too; this is for the moments
// between here and the exit.)
func (r *runner) releaseAll(d *deadline) {
	if r.release == nil || len(r.drained) == 0 {
		return
	}
	var told []string
	for _, nt := range r.drained {
		r.ops.Tick() // a release takes until the deadline at most
		ctx, cancel := context.WithDeadline(context.Background(), latest(d.get(), time.Now().Add(time.Second)))
		err := r.release(ctx, nt)
		cancel()
		r.m.released(err)
		if err != nil {
			r.tl.Printf("release %s: %v", nt, err)
			continue
		}
		told = append(told, fmt.Sprintf("%s (%s)", nt.Source, nt.Event))
	}
	if len(told) > 0 {
		r.tl.Printf("told the sources the work is handed back (Release): %s", strings.Join(told, ", "))
	}
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// extendTimeout keeps telling systemd, while the runner drains, that it
// needs until the deadline (EXTEND_TIMEOUT_USEC), so that TimeoutStopSec
// does not cut the drain short. It returns a function that stops it.
func (r *runner) extendTimeout(d *deadline) func() {
	done := make(chan struct{})
	ended := make(chan struct{})
	send := func() { r.notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", extendUsec(time.Until(d.get())))) }
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

// extendUsec returns the EXTEND_TIMEOUT_USEC for a drain with left to
// go: that plus 5 s, saturating instead of overflowing to a negative
// number when left is huge.
func extendUsec(left time.Duration) int64 {
	const slack = 5 * time.Second
	left = max(left, 0)
	if left > math.MaxInt64-slack {
		return int64(math.MaxInt64) / int64(time.Microsecond)
	}
	return (left + slack).Microseconds()
}

// retryUntil calls op until it succeeds or the deadline passes, with
// backoff, each call bounded so that the last one ends by the deadline. It
// always makes one attempt, of at most lastChance, even past the deadline:
// a deadline is an estimate (the host often outlives a spot notice's
// time), and one more request costs little.
func retryUntil(deadline time.Time, op func(context.Context) error) error {
	const (
		perAttempt = 2 * time.Second
		lastChance = time.Second
	)
	wait := 100 * time.Millisecond
	var err error
	for first := true; ; first = false {
		timeout := min(time.Until(deadline), perAttempt)
		if timeout <= 0 {
			if !first {
				return fmt.Errorf("deadline passed; last error: %w", err)
			}
			timeout = lastChance
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err = op(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if left := time.Until(deadline); left > 0 {
			t := time.NewTimer(min(wait, left))
			<-t.C
			wait = min(2*wait, time.Second)
		}
	}
}
