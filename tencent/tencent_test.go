package tencent_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
)

// A termination time is a Terminate notice whose Deadline is that time,
// read in UTC+8: "2026-11-30 18:02:00" is 10:02 UTC, not 18:02 (the
// test's time is two minutes ahead).
func TestTerminationTimeIsReadInChinaStandardTime(t *testing.T) {
	h := start(t, nil, nil)
	h.polls(1)
	before := time.Now()
	h.srv.SetTerminationTime(deadline)
	nt := h.receive()
	assert.Equal(t, "tencent", nt.Source)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, tencent.EventTermination, nt.Event)
	assert.Equal(t, "spot instance to be reclaimed", nt.Reason)
	assert.Equal(t, deadline.In(time.FixedZone("UTC+8", 8*3600)).Format("2006-01-02 15:04:05"), nt.Raw)
	assert.True(t, nt.Deadline.Equal(deadline), "deadline %v, want %v", nt.Deadline.UTC(), deadline)
	assert.False(t, nt.Observed.Before(before))
	assert.NoError(t, h.status().Err)
}

// The same time is one notice; an earlier one is sent again, a later one
// is not.
func TestOnlyAnEarlierTimeIsReportedAgain(t *testing.T) {
	h := start(t, nil, func(s *tencenttest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	h.polls(3)
	h.quiet()
	h.srv.SetTerminationTime(deadline.Add(time.Minute))
	h.polls(3)
	h.quiet()
	h.srv.SetTerminationTime(deadline.Add(-time.Minute))
	nt := h.receive()
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.True(t, nt.Deadline.Equal(deadline.Add(-time.Minute)))
}

// A termination time that goes back to 404 is Cleared, with the same
// Event; one after it is news again.
func TestAWithdrawnTimeIsCleared(t *testing.T) {
	h := start(t, nil, func(s *tencenttest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	h.srv.ClearTerminationTime()
	nt := h.receive()
	assert.Equal(t, termsig.Cleared, nt.Kind)
	assert.Equal(t, tencent.EventTermination, nt.Event)
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// An instance already to be reclaimed when Watch starts is reported by
// the first look: the notice is on C when Notifier.Ready closes.
func TestATimeAtStartIsReportedBeforeReady(t *testing.T) {
	h := start(t, nil, func(s *tencenttest.Server) { s.SetTerminationTime(deadline) })
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
	h.polls(5)
	h.quiet()
	assert.NoError(t, h.status().Err)
	assert.Empty(t, h.stop())
}

// The first look needs the network: the Source has no Traits.
func TestFirstLookIsRemote(t *testing.T) {
	_, ok := termsig.Source(tencent.New(tencent.Config{})).(termsig.Describer)
	assert.False(t, ok)
}
