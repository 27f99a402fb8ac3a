//go:build unix

package supervisor

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
)

// When a job that still runs is handed back: -stop-timeout before the
// hold's end (at most a third of the hold as first given, at least
// -margin plus minDrain), or -max-hold after the first notice; a later
// notice moves it with its deadline.
func TestHoldHandsBackBeforeItsEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := &supervisor{cfg: Config{StopTimeout: 80 * time.Second, Margin: 5 * time.Second, MaxHold: time.Hour}, log: slog.New(slog.DiscardHandler)}
	held := func(in time.Duration, at time.Time) termsig.Notice {
		return termsig.Notice{Source: "asg", Kind: termsig.Terminate, Event: "lifecycle", Held: true, Deadline: at.Add(in), Observed: at}
	}
	for _, tc := range []struct {
		name    string
		hold    time.Duration // the first notice's deadline, from t0
		maxHold time.Duration
		want    time.Duration // from t0
	}{
		{"a long hold keeps -stop-timeout", 30 * time.Minute, time.Hour, 30*time.Minute - 80*time.Second},
		{"a short hold keeps a third of it", 60 * time.Second, time.Hour, 40 * time.Second},
		{"a very short one keeps -margin and 2 s", 9 * time.Second, time.Hour, 2 * time.Second},
		{"-max-hold comes first", 2 * time.Hour, 10 * time.Minute, 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.cfg.MaxHold = tc.maxHold
			nt := held(tc.hold, t0)
			h := s.newHold(nt)
			h.add(nt)
			assert.Equal(t, t0.Add(tc.want), h.at(s.cfg.MaxHold))
			assert.False(t, h.at(s.cfg.MaxHold).After(nt.Deadline.Add(-s.cfg.Margin)), "never past the deadline less -margin")
		})
	}

	s.cfg.MaxHold = time.Hour
	first := held(60*time.Second, t0)
	h := s.newHold(first)
	h.add(first)
	later := held(60*time.Second, t0.Add(45*time.Second)) // extended by a heartbeat
	assert.True(t, h.has(later))
	h.add(later)
	assert.Equal(t, t0.Add(85*time.Second), h.at(s.cfg.MaxHold), "20 s before the new end: the lead stays a third of the first hold")
	assert.Equal(t, []termsig.Notice{later}, h.notices(), "the latest notice of the event is the one released")
}
