package azure_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
)

// TestUnreadableEntryIsNotCleared: an event of this VM whose entry becomes
// unreadable (an unknown EventStatus) has not left the document: it is
// not Cleared. (Found by review.)
func TestUnreadableEntryIsNotCleared(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("e")
	require.Equal(t, termsig.Terminate, nt.Kind)
	nb := notBefore.Format(http1123)
	h.srv.Inject(azuretest.Fault{Key: azuretest.PathScheduledEvents, Body: doc(1000, event("e", "Preempt", "", nb))})
	h.polls(azuretest.PathScheduledEvents, 3)
	for _, n := range h.stopAndDrain() {
		assert.NotEqual(t, termsig.Cleared, n.Kind, "event still in the document, only its status unreadable: %v", n)
	}
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

// TestCaseFoldedDuplicateKeyIsRefused: encoding/json matches keys
// case-insensitively and the last duplicate wins, so a second, lower-case
// "eventtype" would turn a Freeze into a Terminate. Such a document is
// refused, its error in Status. (Found by review.)
func TestCaseFoldedDuplicateKeyIsRefused(t *testing.T) {
	h := start(t, options{})
	ev := `{"EventId":"e","EventType":"Freeze","ResourceType":"VirtualMachine","Resources":["test-vm"],` +
		`"EventStatus":"Scheduled","NotBefore":"","eventtype":"Preempt"}`
	h.srv.Inject(azuretest.Fault{Key: azuretest.PathScheduledEvents, Body: doc(7, ev)})
	assert.Contains(t, h.failure(), `"eventtype" is not spelled "EventType"`)
	for _, n := range h.stopAndDrain() {
		assert.NotEqual(t, termsig.Terminate, n.Kind, "a non-canonical key decided the kind: %v", n)
	}
}

// TestLowerCaseKeysMakeNoNotice: keys in the wrong case are not Azure's
// document, and make no notice. (Found by review.)
func TestLowerCaseKeysMakeNoNotice(t *testing.T) {
	h := start(t, options{})
	ev := `{"eventid":"e","eventtype":"Preempt","resources":["test-vm"],"eventstatus":"Scheduled","notbefore":""}`
	h.srv.Inject(azuretest.Fault{Key: azuretest.PathScheduledEvents, Body: `{"documentincarnation":7,"events":[` + ev + `]}`})
	h.polls(azuretest.PathScheduledEvents, 3)
	for _, n := range h.stopAndDrain() {
		assert.NotEqual(t, termsig.Terminate, n.Kind, "lower-case keys made %v", n)
	}
}

// TestReleaseStopsWhenEventLeaves: an event that leaves the document while
// its acknowledgement is being retried is "no longer scheduled": Release
// stops rather than retry until its context ends. (Found by review.)
func TestReleaseStopsWhenEventLeaves(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("e")
	h.srv.Inject(azuretest.Fault{Key: "POST", Status: 500})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.src.Release(ctx, nt) }()
	h.srv.SetEvents()
	require.Equal(t, termsig.Cleared, h.receive().Kind)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(time.Second):
		t.Error("Release still retrying an event that left the document a second ago")
		<-done
	}
}

// TestStaleAckMarksReturnedEvent: an acknowledgement in flight while its
// event leaves and comes back (same EventId) does not mark the new stay
// acknowledged: its Release sends one. (Found by review.)
func TestStaleAckMarksReturnedEvent(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	h.srv.Inject(azuretest.Fault{Key: "POST", Count: 1, Delay: 500 * time.Millisecond})
	ctx, cancel := background()
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.src.Release(ctx, nt) }()
	inFlight(t, h.srv, 1)
	h.srv.SetEvents()
	require.Equal(t, termsig.Cleared, h.receive().Kind)
	again := h.scheduled("e")
	require.NoError(t, <-done)
	require.NoError(t, h.src.Release(ctx, again))
	assert.Equal(t, []string{"e", "e"}, h.srv.StartRequests(), "the event back again was never acknowledged")
}

// TestConcurrentReleaseAcksOnce: two concurrent Releases of one notice
// send one acknowledgement. (Found by review.)
func TestConcurrentReleaseAcksOnce(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	h.srv.Inject(azuretest.Fault{Key: "POST", Delay: 200 * time.Millisecond})
	ctx, cancel := background()
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, h.src.Release(ctx, nt)) }()
	}
	wg.Wait()
	assert.Equal(t, []string{"e"}, h.srv.StartRequests())
}

// TestReleaseOfSharedEvent: Azure starts an acknowledged event for every
// resource it lists, so Release refuses an event that names another VM
// too (ErrShared). (Found by review.)
func TestReleaseOfSharedEvent(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Reboot", Resources: []string{"test-vm", "other-vm"}, NotBefore: notBefore})
	nt := h.receive()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.src.Release(ctx, nt)
	assert.ErrorIs(t, err, azure.ErrShared)
	assert.Empty(t, h.srv.StartRequests(), "acknowledged an event that also holds other-vm")
}

// TestReleaseAcrossRestart: after a restart of Watch (same Source, new
// Notifier), a notice of the first run whose event is still scheduled is
// acknowledged at once, not taken for gone until the new run has read a
// document. (Found by review.)
func TestReleaseAcrossRestart(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	h.stopAndDrain()
	h.srv.Inject(azuretest.Fault{Key: azuretest.PathScheduledEvents, Hang: true})
	n2 := termsig.Config{}.New(h.src)
	defer n2.Stop()
	inFlight(t, h.srv, 1) // the new run is polling, has seen no document
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.src.Release(ctx, nt)
	assert.False(t, err == nil && len(h.srv.StartRequests()) == 0, "Release returned nil without acknowledging a scheduled event")
	h.srv.ClearFaults()
}
