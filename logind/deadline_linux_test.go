package logind_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/logind"
	"github.com/termsig/termsig/logind/logindtest"
)

// TestCatchUpDeadlineIsWithinLogindsOwn: a shutdown caught up with (the
// source started, or reconnected, after logind announced it) has an unknown
// start, so its Deadline is now: never later than logind's own.
func TestCatchUpDeadlineIsWithinLogindsOwn(t *testing.T) {
	bus := startBus(t)
	const delay = 3 * time.Second
	fake := startLogind(t, bus, logindtest.Config{InhibitDelayMax: delay})
	announced := time.Now()
	require.NoError(t, fake.PrepareForShutdown("poweroff"))
	<-time.After(time.Second) // the program starts a second into the shutdown
	e := &env{bus: bus, fake: fake, log: testlog.New()}
	e.run(t, logind.Config{})
	nt := recv(t, e.n.C())
	require.Equal(t, termsig.Terminate, nt.Kind)
	assert.False(t, nt.Deadline.After(announced.Add(delay)),
		"Deadline %v after logind's own (%v): the notice promises time that logind does not give",
		nt.Deadline.Sub(announced.Add(delay)).Round(time.Millisecond), announced.Add(delay).Format(time.StampMilli))
}

// A shutdown the source does not hold (NoLock, or a lock that logind
// refused) has the Deadline of logind's actual wait: none when nobody
// holds a delay lock (logind goes on at once), InhibitDelayMaxSec when
// another process holds one.
func TestUnheldShutdownDeadlineIsLogindsWait(t *testing.T) {
	const delay = 7 * time.Second
	for _, tc := range []struct {
		name  string
		fake  logindtest.Config
		src   logind.Config
		other string // the mode of another process's lock for shutdown; "" for none
		want  time.Duration
	}{
		{"NoLock/nobody holds", logindtest.Config{}, logind.Config{NoLock: true}, "", 0},
		{"NoLock/another holds", logindtest.Config{}, logind.Config{NoLock: true}, "delay", delay},
		{"NoLock/another blocks", logindtest.Config{}, logind.Config{NoLock: true}, "block", 0},
		{"refused/nobody holds", logindtest.Config{RefuseLocks: "org.freedesktop.DBus.Error.AccessDenied"}, logind.Config{}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fake.InhibitDelayMax = delay
			e := start(t, opts{fake: tc.fake, src: tc.src})
			if tc.other != "" {
				f, err := logindtest.Inhibit(e.bus.Address(), "sleep:shutdown", "other", "its own reasons", tc.other)
				require.NoError(t, err)
				defer f.Close()
			}
			require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
			nt := recv(t, e.n.C())
			assert.Equal(t, termsig.Terminate, nt.Kind)
			assert.Equal(t, tc.want, nt.Deadline.Sub(nt.Observed))
			assert.False(t, nt.Deadline.IsZero(), "a Deadline of now is known, not zero")
			assert.Contains(t, nt.Reason, "no delay lock")
			assert.Zero(t, e.log.Count(logListFailed))
		})
	}
}

const logListFailed = "logind: cannot tell whether a delay lock holds the shutdown; its Deadline is now"

// When ListInhibitors fails or does not answer, the notice of a shutdown
// the source does not hold still comes, promptly, with the Deadline when
// it was seen (an unknown wait is taken as none), and the failure
// is logged once.
func TestUnheldShutdownDeadlineIsNowWhenListInhibitorsFails(t *testing.T) {
	const delay = 7 * time.Second
	hang := make(chan struct{})
	defer close(hang)
	for _, tc := range []struct {
		name string
		fake logindtest.Config
	}{
		{"refused", logindtest.Config{RefuseList: "org.freedesktop.DBus.Error.AccessDenied"}},
		{"no answer", logindtest.Config{HoldList: hang}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fake.InhibitDelayMax = delay
			e := start(t, opts{fake: tc.fake, src: logind.Config{NoLock: true}})
			for round := range 2 {
				require.NoError(t, e.fake.PrepareForShutdown("poweroff"))
				sent := time.Now()
				nt := recv(t, e.n.C())
				assert.Less(t, time.Since(sent), 2*time.Second, "the notice waited for ListInhibitors")
				assert.Equal(t, nt.Observed, nt.Deadline, "an unknown wait is none: never a Deadline later than logind's")
				assert.Contains(t, nt.Reason, "unknown")
				require.NoError(t, e.fake.CancelShutdown("poweroff"))
				assert.Equal(t, termsig.Cleared, recv(t, e.n.C()).Kind, "round %d", round)
			}
			assert.Equal(t, 1, e.log.Count(logListFailed), "logged once")
		})
	}
}
