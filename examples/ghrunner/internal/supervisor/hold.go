//go:build unix

package supervisor

import (
	"time"

	"github.com/termsig/termsig"
)

// A hold is a held termination ([termsig.Notice.Held], such as an Auto
// Scaling termination hook's) that came while run.sh ran a job: the
// platform keeps the machine until the notice is released, so the job is
// left to finish. The cleanup starts once it has, or, with the job still
// running, at the hold's cleanup time (see at), when it is handed back as
// after a hard notice. A hard notice meanwhile ends the hold at once.
type hold struct {
	first time.Time // when the first held notice was seen: -max-hold counts from it
	// lead is how long before the hold's end a job still running is
	// handed back: -stop-timeout, as a SIGTERM gets, but at most a third
	// of the hold as its first notice gave it, so that a short hold
	// (a heartbeat timeout of 30 s, extended as it goes) still waits for
	// the job; and at least -margin plus minDrain.
	lead time.Duration
	// latest is the latest held notice of each (Source, Event): the one
	// that says where the hold stands, and the one released.
	latest map[holdKey]termsig.Notice
	order  []holdKey // the keys of latest, in the order they came
	job    string    // the job run.sh ran when the hold began, for the webhook
}

type holdKey struct{ source, event string }

func keyOf(nt termsig.Notice) holdKey { return holdKey{nt.Source, nt.Event} }

func (s *supervisor) newHold(nt termsig.Notice) *hold {
	seen := seenAt(nt)
	lead := min(s.cfg.StopTimeout, nt.Deadline.Sub(seen)/3)
	return &hold{first: seen, lead: max(lead, s.cfg.Margin+minDrain), latest: map[holdKey]termsig.Notice{}}
}

// add notes nt, a held notice; one for an event already held moves that
// event's end.
func (h *hold) add(nt termsig.Notice) {
	k := keyOf(nt)
	if _, ok := h.latest[k]; !ok {
		h.order = append(h.order, k)
	}
	h.latest[k] = nt
}

// has reports whether nt is about an event the hold holds.
func (h *hold) has(nt termsig.Notice) bool {
	_, ok := h.latest[keyOf(nt)]
	return ok
}

// end returns the latest notice of the event whose hold ends first, and
// that end, its Deadline.
func (h *hold) end() termsig.Notice {
	var first termsig.Notice
	for i, k := range h.order {
		if nt := h.latest[k]; i == 0 || nt.Deadline.Before(first.Deadline) {
			first = nt
		}
	}
	return first
}

// at is when a job that still runs is handed back: maxHold after the
// first held notice, or lead before the hold's end, whichever comes
// first. It is never after the hold's end minus -margin.
func (h *hold) at(maxHold time.Duration) time.Time {
	by := h.end().Deadline.Add(-h.lead)
	if limit := h.first.Add(maxHold); limit.Before(by) {
		return limit
	}
	return by
}

// notices returns the latest notice of each event held, to release.
func (h *hold) notices() []termsig.Notice {
	out := make([]termsig.Notice, 0, len(h.order))
	for _, k := range h.order {
		out = append(out, h.latest[k])
	}
	return out
}

// seenAt is when nt was seen: its Observed, or now.
func seenAt(nt termsig.Notice) time.Time {
	if nt.Observed.IsZero() {
		return time.Now()
	}
	return nt.Observed
}

// held acts on a held notice while run.sh runs and no cleanup has begun.
// An idle runner has nothing to wait for: the cleanup starts at once. A
// busy one's job is left to finish, and the hold's timer set to its
// cleanup time; a later held notice moves that time.
func (s *supervisor) held(nt termsig.Notice) {
	if s.hold == nil {
		if busy, _, _ := s.child.State(); !busy {
			s.log.Warn("ghrunner: held termination, and run.sh runs no job: cleaning up", "notice", nt)
			s.startDrain(nt)
			return
		}
		s.hold = s.newHold(nt)
		_, s.hold.job, _ = s.child.State()
		s.ops.Acted(nt) // the job's hand-back is set for the hold's end
		// The cleanup after the job replaces a restart that waited for it.
		s.reloading = false
	}
	moved := s.hold.has(nt)
	s.hold.add(nt)
	at := s.hold.at(s.cfg.MaxHold)
	if !time.Now().Before(at) {
		s.endHold(false) // a hold too short to wait in, or -max-hold 0
		return
	}
	attrs := []any{"notice", nt, "hand_back_in", time.Until(at).Round(time.Millisecond)}
	if moved {
		s.log.Info("ghrunner: the hold moved", attrs...)
	} else {
		_, job, _ := s.child.State()
		s.log.Warn("ghrunner: held termination: letting the job finish", append(attrs, "job", job)...)
	}
	s.holdTimer.Reset(time.Until(at))
}

// endHold starts the cleanup after the hold: jobEnded says that run.sh's
// job ended (or run.sh did), else the hold's cleanup time has come with
// the job still running, and the cleanup is the one after a hard notice
// whose deadline is the hold's end. Either way its time counts from now,
// and what was held is released when it is done.
func (s *supervisor) endHold(jobEnded bool) {
	nt := s.hold.end()
	nt.Observed = time.Now()
	if jobEnded {
		s.log.Info("ghrunner: the job ended within the hold: cleaning up", "notice", nt)
		if res := s.child.Result(s.child.JobsStarted()); res != "" {
			s.ops.Outcome(nt, OutcomeJobFinished, map[string]string{"job": s.hold.job, "result": res})
		}
	} else {
		s.log.Warn("ghrunner: the hold's end is near and the job still runs: handing it back, as for a hard notice", "notice", nt)
	}
	s.beginDrain(nt, s.stopHold(), jobEnded)
}

// stopHold ends the hold, if any, and returns its notices, to release.
func (s *supervisor) stopHold() []termsig.Notice {
	if s.hold == nil {
		return nil
	}
	s.holdTimer.Stop()
	nts := s.hold.notices()
	s.hold = nil
	return nts
}
