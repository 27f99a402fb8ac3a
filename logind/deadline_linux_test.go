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
