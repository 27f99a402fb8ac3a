package alibaba_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
)

// A termination time is a Terminate notice whose Deadline is that time,
// read as UTC.
func TestTerminationTimeIsATerminateWithItsDeadline(t *testing.T) {
	h := start(t, nil, nil)
	h.polls(alibabatest.PathTerminationTime, 1)
	before := time.Now()
	h.srv.SetTerminationTime(deadline)
	nt := h.receive()
	assert.Equal(t, "alibaba", nt.Source)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, alibaba.EventTermination, nt.Event)
	assert.Equal(t, "spot instance to be released", nt.Reason)
	assert.True(t, nt.Deadline.Equal(deadline), "deadline %v", nt.Deadline)
	assert.Equal(t, deadline.Format(time.RFC3339), nt.Raw)
	assert.False(t, nt.Observed.Before(before), "observed when the answer came")
	assert.NoError(t, h.status().Err)
}

// The same time, read on every poll, is one notice.
func TestTheSameTimeIsReportedOnce(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	h.polls(alibabatest.PathTerminationTime, 5)
	h.quiet()
}

// A time earlier than the one reported is sent again, with the earlier
// Deadline; a later one is not: the program was told no later.
func TestAnEarlierTimeIsReportedALaterOneIsNot(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	h.srv.SetTerminationTime(deadline.Add(time.Minute))
	h.polls(alibabatest.PathTerminationTime, 3)
	h.quiet()
	earlier := deadline.Add(-2 * time.Minute)
	h.srv.SetTerminationTime(earlier)
	nt := h.receive()
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, alibaba.EventTermination, nt.Event, "the same event")
	assert.True(t, nt.Deadline.Equal(earlier), "deadline %v", nt.Deadline)
}

// A termination time that goes back to 404 is Cleared, with the Event of
// the notice it clears; a new one after it is news again.
func TestAWithdrawnTimeIsCleared(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	h.srv.ClearTerminationTime()
	nt := h.receive()
	assert.Equal(t, termsig.Cleared, nt.Kind)
	assert.Equal(t, alibaba.EventTermination, nt.Event)
	assert.True(t, nt.Deadline.IsZero())
	h.polls(alibabatest.PathTerminationTime, 3)
	h.quiet()
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// An instance already to be released when Watch starts is reported by the
// first look: the notice is on C when Notifier.Ready closes.
func TestATimeAtStartIsReportedBeforeReady(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.SetTerminationTime(deadline) })
	select {
	case <-h.n.Ready():
	case <-time.After(wait):
		t.Fatal("not ready")
	}
	select {
	case nt := <-h.n.C():
		assert.Equal(t, termsig.Terminate, nt.Kind)
	default:
		t.Fatal("ready before the notice of the first look was on C")
	}
}

// Nothing scheduled is no notice, and a healthy source.
func TestNothingScheduledIsNoNotice(t *testing.T) {
	h := start(t, nil, nil)
	h.polls(alibabatest.PathTerminationTime, 5)
	h.quiet()
	assert.NoError(t, h.status().Err)
	assert.Empty(t, h.stop())
}

// The first look needs the network: the Source has no Traits, so that
// termsig.New does not wait for it.
func TestFirstLookIsRemote(t *testing.T) {
	_, ok := termsig.Source(alibaba.New(alibaba.Config{})).(termsig.Describer)
	assert.False(t, ok)
}

// One Source may be watched by two Notifiers at once, each on its own.
func TestTwoWatchesOfOneSource(t *testing.T) {
	srv := alibabatest.NewServer()
	defer srv.Close()
	src := alibaba.New(fast(srv))
	a, b := quiet.New(src), quiet.New(src)
	defer a.Stop()
	defer b.Stop()
	srv.SetTerminationTime(deadline)
	for _, n := range []*termsig.Notifier{a, b} {
		select {
		case nt := <-n.C():
			require.Equal(t, termsig.Terminate, nt.Kind)
		case <-time.After(wait):
			t.Fatal("no notice")
		}
	}
}
