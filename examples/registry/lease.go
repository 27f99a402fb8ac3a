package registry

import (
	"slices"
	"time"
)

// Leases live in memory only: renewing one on every claim poll must not
// write the state file. A registry that starts gives every runner a new
// lease, so that a registry outage never removes the runners that could
// not reach it.
//
// The registry cannot tell a dead runner from one that cannot reach it,
// so a lease lapses only while the registry is hearing from someone:
// after a silence of half a lease (the registry was stopped, hung or cut
// off, or everything was idle) every lease starts again. Live runners
// send a request at least every third of a lease, so while one of them is
// up the registry is never that silent, and a dead runner's lease lapses on
// time.

// reasonLapsed is the History reason of an attempt whose runner's lease
// lapsed.
const reasonLapsed = "the runner's lease lapsed while it ran the job"

// renew extends runner id's lease from now. It reads the clock itself:
// lease ends live in memory only, so they keep the clock's monotonic
// reading, and a step of the wall clock (NTP, a resumed VM) does not lapse
// every lease at once. The caller holds s.mu.
func (s *Server) renew(id string) { s.leases[id] = s.now().Add(s.cfg.Lease) }

// syncLeases gives each runner of the committed state that has no lease a
// new one, and forgets the leases of runners that are gone. The caller
// holds s.mu.
func (s *Server) syncLeases() {
	seen := make(map[string]bool, len(s.st.Runners))
	for _, rn := range s.st.Runners {
		seen[rn.ID] = true
		if _, ok := s.leases[rn.ID]; !ok {
			s.renew(rn.ID)
		}
	}
	for id := range s.leases {
		if !seen[id] {
			delete(s.leases, id)
		}
	}
}

// expireLeases removes the runners whose lease has lapsed and re-queues
// their jobs. It runs before every request, so that whoever asks sees no
// runner whose lease has lapsed. If the change cannot be saved it is
// tried again at the next request.
func (s *Server) expireLeases() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if silence := now.Sub(s.heard); silence > s.cfg.Lease/2 && len(s.leases) > 0 {
		for id := range s.leases {
			s.renew(id)
		}
		s.log().Info("no request for a while: every lease starts again", "silence", silence.Round(time.Millisecond), "runners", len(s.leases))
	}
	s.heard = now
	var lapsed []string
	for id, until := range s.leases {
		if !now.Before(until) {
			lapsed = append(lapsed, id)
		}
	}
	if len(lapsed) == 0 {
		return
	}
	slices.Sort(lapsed)
	requeued := map[string]string{}
	err := s.commit(func(st *state, now time.Time) error {
		for _, id := range lapsed {
			requeued[id] = removeRunner(st, id, reasonLapsed, now)
		}
		return nil
	})
	if err != nil {
		return // logged by commit
	}
	for _, id := range lapsed {
		if requeued[id] != "" {
			s.log().Info("job re-queued", "job", requeued[id], "runner", id, "reason", reasonLapsed)
		}
		s.log().Info("runner removed: its lease lapsed", "runner", id, "lease", s.cfg.Lease)
	}
}
