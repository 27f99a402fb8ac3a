package azure_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

// An event of this VM that cannot be reported (an EventType or
// EventStatus the source does not know, no usable EventId) makes no
// notice and shows in Status, naming what is wrong; the events beside it
// are reported, and the source is healthy again once the document is
// fixed.
func TestEventsThatCannotBeReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  azuretest.Event
		want string // in Status
	}{
		{"unknown EventType", azuretest.Event{EventID: "bad", EventType: "Explode"}, `azure: event bad: unknown EventType "Explode"`},
		{"EventType in another case", azuretest.Event{EventID: "bad", EventType: "preempt"}, `azure: event bad: unknown EventType "preempt"`},
		{"no EventType", azuretest.Event{EventID: "bad"}, `azure: event bad: unknown EventType ""`},
		{"unknown EventStatus", azuretest.Event{EventID: "bad", EventType: "Reboot", EventStatus: "Completed"}, `azure: event bad: unknown EventStatus "Completed"`},
		{"empty EventId", azuretest.Event{EventType: "Preempt"}, "azure: an event without an EventId"},
		{"long EventType clipped", azuretest.Event{EventID: "bad", EventType: strings.Repeat("Z", 100)}, `azure: event bad: unknown EventType "` + strings.Repeat("Z", 40) + `…"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{})
			bad := tc.bad
			bad.NotBefore = notBefore
			marker := azuretest.Event{EventID: "marker", EventType: "Freeze", NotBefore: notBefore}
			h.srv.SetEvents(bad, marker)
			// The problem is reported before the notices of the same
			// document are sent: by the marker's, Status has it.
			assert.Equal(t, "marker", h.receive().Event)
			st := h.status()
			assert.Equal(t, termsig.StateRunning, st.State)
			require.Error(t, st.Err)
			assert.Equal(t, tc.want, st.Err.Error())
			assert.Contains(t, h.failure(), tc.want)
			h.polls(azuretest.PathScheduledEvents, 3)
			h.quiet()
			assert.Equal(t, 1, h.logs.Count(failing), "one log line for the problem, not one per poll")

			fixed := bad
			fixed.EventID, fixed.EventType, fixed.EventStatus = "fixed", "Reboot", ""
			h.srv.SetEvents(fixed, marker)
			nt := h.receive()
			assert.Equal(t, "fixed", nt.Event)
			assert.Equal(t, termsig.Reboot, nt.Kind)
			h.recovered()
			assert.NoError(t, h.status().Err)
			h.polls(azuretest.PathScheduledEvents, 2)
			assert.Empty(t, events(h.stopAndDrain()))
		})
	}
}

// Two problems in one document: both in Status.
func TestSeveralProblems(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(
		azuretest.Event{EventID: "b1", EventType: "Explode"},
		azuretest.Event{EventID: "b2", EventType: "Reboot", EventStatus: "Paused"},
		azuretest.Event{EventID: "marker", EventType: "Freeze", NotBefore: notBefore},
	)
	assert.Equal(t, "marker", h.receive().Event)
	err := h.status().Err
	require.Error(t, err)
	assert.Contains(t, err.Error(), `event b1: unknown EventType "Explode"`)
	assert.Contains(t, err.Error(), `event b2: unknown EventStatus "Paused"`)
}

// An event reported before that turns bad is no longer this VM's event
// as far as the source can tell: Cleared, and the problem shown.
func TestReportedEventTurnsBad(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Reboot", NotBefore: notBefore})
	assert.Equal(t, termsig.Reboot, h.receive().Kind)
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Reboot", EventStatus: "Completed", NotBefore: notBefore})
	h.failure() // the problem shows
	assert.ErrorContains(t, h.status().Err, `event e: unknown EventStatus "Completed"`)
	// Still in the document: not cleared. Once it leaves, it is.
	h.srv.SetEvents()
	nt := h.receive()
	assert.Equal(t, termsig.Cleared, nt.Kind)
	assert.Equal(t, "e", nt.Event)
}

// A NotBefore that is not an RFC 1123 or RFC 3339 time: the notice goes
// out without a deadline (the event is real), and Status shows the
// problem. The fake writes NotBefore from a time.Time, so the document is
// a fault body.
func TestUnparsableNotBefore(t *testing.T) {
	for _, nb := range []string{"tomorrow", "30/11/2026 10:02", "Mon, 30 Nov 2026 10:02:00"} {
		t.Run(nb, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{})
			h.polls(azuretest.PathScheduledEvents, 1)
			h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Body: doc(100, event("odd", "Preempt", "Scheduled", nb))})
			nt := h.receive()
			assert.Equal(t, "odd", nt.Event)
			assert.Equal(t, termsig.Terminate, nt.Kind)
			assert.True(t, nt.Deadline.IsZero(), "deadline %v from %q", nt.Deadline, nb)
			assert.Contains(t, nt.Raw, nb)
			want := `azure: event odd: NotBefore "` + nb + `" is not an RFC 1123 or RFC 3339 time`
			assert.EqualError(t, h.status().Err, want)
			assert.Contains(t, h.failure(), want)
			h.polls(azuretest.PathScheduledEvents, 3)
			h.quiet()

			// Fixed (the fake's own document, where the event is gone).
			h.srv.ClearFaults()
			gone := h.receive()
			assert.Equal(t, termsig.Cleared, gone.Kind)
			assert.Equal(t, "odd", gone.Event)
			h.recovers()
		})
	}
}

// An event of this VM whose entry becomes unreadable (an unknown
// EventStatus) has not left the document: it is not Cleared.
func TestUnreadableEntryIsNotCleared(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("e")
	require.Equal(t, termsig.Terminate, nt.Kind)
	nb := notBefore.Format(http1123)
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Body: doc(1000, event("e", "Preempt", "", nb))})
	h.polls(azuretest.PathScheduledEvents, 3)
	for _, n := range h.stopAndDrain() {
		assert.NotEqual(t, termsig.Cleared, n.Kind, "event still in the document, only its status unreadable: %v", n)
	}
}

// http1123 is RFC 1123 as NotBefore carries it, in GMT.
const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

// encoding/json matches keys case-insensitively and the last duplicate
// wins, so a second, lower-case "eventtype" would turn a Freeze into a
// Terminate. Such a document is refused, its error in Status.
func TestCaseFoldedDuplicateKeyIsRefused(t *testing.T) {
	h := start(t, options{})
	ev := `{"EventId":"e","EventType":"Freeze","ResourceType":"VirtualMachine","Resources":["test-vm"],` +
		`"EventStatus":"Scheduled","NotBefore":"","eventtype":"Preempt"}`
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Body: doc(7, ev)})
	assert.Contains(t, h.failure(), `"eventtype" is not spelled "EventType"`)
	for _, n := range h.stopAndDrain() {
		assert.NotEqual(t, termsig.Terminate, n.Kind, "a non-canonical key decided the kind: %v", n)
	}
}

// Keys in the wrong case are not Azure's document, and make no notice.
func TestLowerCaseKeysMakeNoNotice(t *testing.T) {
	h := start(t, options{})
	ev := `{"eventid":"e","eventtype":"Preempt","resources":["test-vm"],"eventstatus":"Scheduled","notbefore":""}`
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Body: `{"documentincarnation":7,"events":[` + ev + `]}`})
	h.polls(azuretest.PathScheduledEvents, 3)
	for _, n := range h.stopAndDrain() {
		assert.NotEqual(t, termsig.Terminate, n.Kind, "lower-case keys made %v", n)
	}
}
