//go:build linux

package main

import (
	"slices"
	"time"

	"github.com/termsig/termsig"
)

// A hold is a held termination (termsig.Notice.Held), such as an Auto
// Scaling scale-in kept waiting by a lifecycle hook: the platform keeps
// the host until the runner releases the notice, and the source extends
// the hold on its own meanwhile, sending a later notice of the same event
// each time. The runner claims nothing more, lets its job finish, and
// leaves as a drain does (the result delivered, then unregistered), then
// releases the hold so that the host goes at once. A job still running at
// the hold's end is stopped and re-queued as under a hard notice; a hard
// notice meanwhile, or the hold lapsing, drains at once.
type hold struct {
	from    time.Time        // when the first held notice was seen
	notices []termsig.Notice // the latest held notice of each event
	end     time.Time        // when a job still running is stopped
	capped  bool             // end is -max-hold after from
	over    bool             // end has come
}

// holdFor handles a held notice with a deadline. The first stops claiming
// and lets the job finish; each one moves the hold's end (see holdEnd). A
// hold whose end has come already leaves no time to finish: the notice is
// then urgent, and drained at once.
func (r *runner) holdFor(nt termsig.Notice) {
	h := r.holding
	first := h == nil
	if first {
		from := nt.Observed
		if from.IsZero() {
			from = time.Now()
		}
		h = &hold{from: from}
	}
	h.keep(nt)
	end, capped := r.holdEnd(h)
	if !end.After(time.Now()) {
		r.urgent = &nt // drain prints it
		return
	}
	if first {
		r.holding = h
		r.ops.Acted(nt) // claiming stops
		r.tl.mark(h.from)
		r.tl.Printf("notice: %v", nt)
		r.notify("STOPPING=1")
	}
	r.keepDrained(nt) // released once the runner has left
	moved := !end.Equal(h.end)
	h.end, h.capped = end, capped
	until := "until " + end.UTC().Format(time.RFC3339) + " (in " + fmtDur(time.Until(end)) + ")"
	if capped {
		until += ", -max-hold after the first held notice"
	}
	switch {
	case !first && moved:
		r.tl.Printf("the hold moved: %v; a job may finish %s", nt, until)
	case !first:
		r.tl.Printf("notice: %v; the hold's end stays", nt)
	case r.job != nil:
		r.tl.Printf("held: stopped claiming jobs; job %s may finish %s", r.job.job.ID, until)
	default:
		r.tl.Printf("held: stopped claiming jobs; no job running")
	}
}

// holdEnd is when a job still running under h is stopped: -grace before
// the earliest of its deadlines minus -margin, so that the job gets its
// -grace after SIGTERM and the runner its -margin to re-queue it and
// unregister, as under a hard notice with that deadline; but at most
// -max-hold after the first held notice (capped).
func (r *runner) holdEnd(h *hold) (end time.Time, capped bool) {
	for _, nt := range h.notices {
		if e := nt.Deadline.Add(-r.cfg.margin - r.cfg.grace); end.IsZero() || e.Before(end) {
			end = e
		}
	}
	if limit := h.from.Add(r.cfg.maxHold); end.After(limit) {
		return limit, true
	}
	return end, false
}

// endHold leaves under a hold: its job has finished (or there was none),
// or the hold's end has come and the job is stopped and re-queued as a
// drain does. The drain's deadline is the hold's, at most -stop-timeout
// from now. The result is delivered, the runner unregistered, then the
// hold released.
func (r *runner) endHold() int {
	h := r.holding
	nt := h.binding()
	d := &deadline{at: r.deadlineFrom(nt, time.Now())}
	stopExtending := r.extendTimeout(d)
	defer stopExtending()
	if r.job == nil {
		r.tl.Printf("no job left to wait for under the hold: leaving; deadline in %v", fmtDur(time.Until(d.get())))
		return r.leave(nt, d)
	}
	why := "its deadline minus -margin and -grace"
	if h.capped {
		why = "-max-hold"
	}
	r.tl.Printf("the hold's end (%s), and job %s still runs: stopping it; deadline in %v", why, r.job.job.ID, fmtDur(time.Until(d.get())))
	r.stopJob(nt, d)
	return r.leave(nt, d)
}

// keep records nt as the latest held notice of its event.
func (h *hold) keep(nt termsig.Notice) {
	if i := slices.IndexFunc(h.notices, func(o termsig.Notice) bool { return sameEvent(o, nt) }); i >= 0 {
		h.notices[i] = nt
		return
	}
	h.notices = append(h.notices, nt)
}

// binding returns the held notice whose deadline comes first: the one
// the host goes by.
func (h *hold) binding() termsig.Notice {
	nt := h.notices[0]
	for _, o := range h.notices[1:] {
		if o.Deadline.Before(nt.Deadline) {
			nt = o
		}
	}
	return nt
}

// sameEvent reports whether a and b are notices of the same event.
func sameEvent(a, b termsig.Notice) bool { return a.Source == b.Source && a.Event == b.Event }
