package azure_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/termsigtest"
)

func TestSourceBasics(t *testing.T) {
	src := azure.New(azure.Config{})
	assert.Equal(t, "azure", src.Name())
	assert.Equal(t, azure.Name, src.Name())
	_, ok := termsig.Source(src).(termsig.Describer)
	assert.False(t, ok, "a Traits method: the first look needs the network, New must not wait for it")
	var _ termsig.Releaser = src
	var _ termsig.Detector = src
}

// Each EventType gives its kind, with the event's id, NotBefore, a reason
// and the event as sent.
func TestEventTypes(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		kind termsig.Kind
	}{
		{"Preempt", termsig.Terminate},
		{"Terminate", termsig.Terminate},
		{"Redeploy", termsig.Terminate},
		{"Reboot", termsig.Reboot},
		{"Freeze", termsig.Maintenance},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{})
			h.polls(azuretest.PathScheduledEvents, 2)
			h.quiet()
			id := "ev-" + strings.ToLower(tc.typ)
			before := time.Now()
			h.srv.SetEvents(azuretest.Event{EventID: id, EventType: tc.typ, NotBefore: notBefore, Description: "why " + tc.typ})
			nt := h.receive()
			assert.Equal(t, "azure", nt.Source)
			assert.Equal(t, tc.kind, nt.Kind)
			assert.Equal(t, id, nt.Event)
			assert.True(t, notBefore.Equal(nt.Deadline), "deadline %v", nt.Deadline)
			assert.Equal(t, tc.typ+" scheduled: why "+tc.typ, nt.Reason)
			assert.False(t, nt.Observed.Before(before), "observed %v before the event was set", nt.Observed)
			var raw map[string]any
			require.NoError(t, json.Unmarshal([]byte(nt.Raw), &raw), "Raw is the event as sent: %q", nt.Raw)
			assert.Equal(t, id, raw["EventId"])
			assert.Equal(t, tc.typ, raw["EventType"])
			assert.Equal(t, notBefore.Format(http.TimeFormat), raw["NotBefore"])
			assert.Empty(t, events(h.stopAndDrain()))
		})
	}
}

// NotBefore is RFC 1123, in whole seconds: the deadline is the second the
// document names.
func TestDeadlineIsNotBeforeInWholeSeconds(t *testing.T) {
	h := start(t, options{})
	nb := time.Now().Add(30*time.Second + 700*time.Millisecond)
	h.srv.SetEvents(azuretest.Event{EventID: "spot", EventType: "Preempt", NotBefore: nb})
	nt := h.receive()
	assert.Equal(t, nb.Truncate(time.Second).Unix(), nt.Deadline.Unix())
	assert.Zero(t, nt.Deadline.Nanosecond())
	assert.Equal(t, time.UTC, nt.Deadline.Location())
}

// An event first seen under way has no NotBefore: its deadline is when it
// was seen.
func TestEventFirstSeenStarted(t *testing.T) {
	h := start(t, options{})
	h.polls(azuretest.PathScheduledEvents, 1)
	before := time.Now()
	h.srv.SetEvents(azuretest.Event{EventID: "frz", EventType: "Freeze", EventStatus: "Started", DurationInSeconds: 5})
	nt := h.receive()
	after := time.Now()
	assert.Equal(t, termsig.Maintenance, nt.Kind)
	assert.Equal(t, "frz", nt.Event)
	assert.Equal(t, "Freeze started", nt.Reason)
	assert.False(t, nt.Deadline.Before(before), "deadline %v before the event was set (%v)", nt.Deadline, before)
	assert.False(t, nt.Deadline.After(after), "deadline %v after the notice arrived (%v)", nt.Deadline, after)
	assert.Contains(t, nt.Raw, `"NotBefore":""`)
}

// An event already scheduled when the source starts is reported by the
// first look.
func TestEventPendingAtStart(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) {
		s.SetEvents(azuretest.Event{EventID: "early", EventType: "Reboot", NotBefore: notBefore})
	}})
	nt := h.receive()
	assert.Equal(t, termsig.Reboot, nt.Kind)
	assert.Equal(t, "early", nt.Event)
}

// One event, one notice, however often it is polled and whatever its
// DocumentIncarnation does.
func TestOneNoticePerEvent(t *testing.T) {
	h := start(t, options{})
	e := azuretest.Event{EventID: "once", EventType: "Preempt", NotBefore: notBefore}
	h.srv.SetEvents(e)
	assert.Equal(t, "once", h.receive().Event)
	h.polls(azuretest.PathScheduledEvents, 10)
	h.quiet()

	// The same events in a new incarnation: nothing new.
	h.srv.BumpIncarnation()
	h.polls(azuretest.PathScheduledEvents, 3)
	h.quiet()

	// Set again as they are (the fake keeps the incarnation): nothing.
	h.srv.SetEvents(e)
	// A change that is not news (the description): a new incarnation, no notice.
	e.Description = "now with a description"
	h.srv.SetEvents(e)
	h.polls(azuretest.PathScheduledEvents, 3)
	assert.Empty(t, events(h.stopAndDrain()))
	assert.GreaterOrEqual(t, h.srv.Requests(azuretest.PathScheduledEvents), 16)
}

// An event is reported again when its NotBefore or EventType changes, and
// when it starts (its NotBefore emptied); Cleared when it leaves.
func TestEventChanges(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Freeze", NotBefore: notBefore})
	first := h.receive()
	assert.Equal(t, termsig.Maintenance, first.Kind)
	assert.True(t, notBefore.Equal(first.Deadline))

	later := notBefore.Add(10 * time.Minute)
	h.srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Freeze", NotBefore: later})
	second := h.receive()
	assert.Equal(t, "e1", second.Event)
	assert.Equal(t, termsig.Maintenance, second.Kind)
	assert.True(t, later.Equal(second.Deadline), "deadline %v, want the new NotBefore", second.Deadline)

	h.srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot", NotBefore: later})
	third := h.receive()
	assert.Equal(t, "e1", third.Event)
	assert.Equal(t, termsig.Reboot, third.Kind)

	before := time.Now()
	h.srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot", EventStatus: "Started"})
	started := h.receive()
	assert.Equal(t, "e1", started.Event)
	assert.Equal(t, termsig.Reboot, started.Kind)
	assert.Equal(t, "Reboot started", started.Reason)
	assert.False(t, started.Deadline.Before(before), "a started event is due now")
	assert.False(t, started.Deadline.After(time.Now()))

	h.polls(azuretest.PathScheduledEvents, 3)
	h.quiet()
	h.srv.SetEvents()
	gone := h.receive()
	assert.Equal(t, termsig.Cleared, gone.Kind)
	assert.Equal(t, "e1", gone.Event, "Cleared carries the Event it clears")
	assert.Equal(t, "azure", gone.Source)
	assert.Equal(t, "no longer scheduled", gone.Reason)
	assert.Empty(t, events(h.stopAndDrain()))
}

// An acknowledged event starts (the fake does as Azure does): a second
// notice, due now.
func TestEventStartsAfterRelease(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(azuretest.Event{EventID: "spot", EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)})
	nt := h.receive()
	ctx, cancel := background()
	defer cancel()
	before := time.Now()
	require.NoError(t, h.n.Release(ctx, nt))
	started := h.receive()
	assert.Equal(t, "spot", started.Event)
	assert.Equal(t, termsig.Terminate, started.Kind)
	assert.Equal(t, "Preempt started", started.Reason)
	assert.False(t, started.Deadline.Before(before))
	assert.False(t, started.Deadline.After(time.Now()))
}

// Several events at once: one notice each, in the document's order, and a
// Cleared for each one that leaves, the others left alone.
func TestSeveralEvents(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(
		azuretest.Event{EventID: "a", EventType: "Freeze", NotBefore: notBefore},
		azuretest.Event{EventID: "b", EventType: "Reboot", NotBefore: notBefore},
		azuretest.Event{EventID: "c", EventType: "Redeploy", NotBefore: notBefore},
	)
	assert.Equal(t, []string{"maintenance a", "reboot b", "terminate c"},
		events([]termsig.Notice{h.receive(), h.receive(), h.receive()}))
	h.srv.SetEvents(azuretest.Event{EventID: "b", EventType: "Reboot", NotBefore: notBefore})
	assert.Equal(t, []string{"cleared a", "cleared c"}, events([]termsig.Notice{h.receive(), h.receive()}))
	h.polls(azuretest.PathScheduledEvents, 2)
	assert.Empty(t, events(h.stopAndDrain()))
}

// The same EventId twice in one document is one event, the stronger of
// the two entries: a Reboot listed first does not hide a Preempt.
func TestDuplicateEventIDs(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(
		azuretest.Event{EventID: "dup", EventType: "Reboot", NotBefore: notBefore},
		azuretest.Event{EventID: "dup", EventType: "Preempt", NotBefore: notBefore},
	)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
	h.polls(azuretest.PathScheduledEvents, 3)
	assert.Empty(t, events(h.stopAndDrain()))
}

// The document is the same for every VM of an availability set: only
// events whose Resources name this VM (in any case), as a VirtualMachine,
// are this VM's.
func TestEventsForOtherVMs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		e     azuretest.Event
		notes bool
	}{
		{"another VM", azuretest.Event{Resources: []string{"other-vm"}}, false},
		{"no resources", azuretest.Event{Resources: []string{}}, false},
		{"a name that starts like this VM's", azuretest.Event{Resources: []string{"test-vm-2"}}, false},
		{"part of this VM's name", azuretest.Event{Resources: []string{"test"}}, false},
		{"another resource type", azuretest.Event{ResourceType: "AvailabilitySet", Resources: []string{"test-vm"}}, false},
		{"upper case", azuretest.Event{Resources: []string{"TEST-VM"}}, true},
		{"mixed case", azuretest.Event{Resources: []string{"Test-Vm"}}, true},
		{"among others", azuretest.Event{Resources: []string{"other-vm", "test-vm"}}, true},
		{"resource type in lower case", azuretest.Event{ResourceType: "virtualmachine", Resources: []string{"test-vm"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{})
			e := tc.e
			e.EventID, e.EventType, e.NotBefore = "theirs", "Preempt", notBefore
			// The marker, this VM's, comes after: its notice shows that the
			// document was taken in, and that nothing came before it.
			marker := azuretest.Event{EventID: "marker", EventType: "Freeze", NotBefore: notBefore}
			h.srv.SetEvents(e, marker)
			want := []string{"maintenance marker"}
			if tc.notes {
				want = []string{"terminate theirs", "maintenance marker"}
			}
			got := []termsig.Notice{h.receive()}
			if tc.notes {
				got = append(got, h.receive())
			}
			assert.Equal(t, want, events(got))
			// Gone: a Cleared only for what was reported.
			h.srv.SetEvents()
			got = []termsig.Notice{h.receive()}
			if tc.notes {
				got = append(got, h.receive())
			}
			want = []string{"cleared marker"}
			if tc.notes {
				want = []string{"cleared marker", "cleared theirs"}
			}
			assert.Equal(t, want, events(got))
			h.polls(azuretest.PathScheduledEvents, 2)
			assert.Empty(t, events(h.stopAndDrain()))
			assert.NoError(t, h.status().Err, "another VM's event is not a problem")
			if !tc.notes {
				h.own.WaitFor(t, "azure: an event for other resources", 1)
			}
		})
	}
}

// Config.VMName is the VM's name: the metadata service is not asked.
func TestConfigVMNameOverrides(t *testing.T) {
	cfg := quick()
	cfg.VMName = "my-vm"
	h := start(t, options{cfg: &cfg})
	h.srv.SetEvents(
		azuretest.Event{EventID: "for-test-vm", EventType: "Preempt", NotBefore: notBefore}, // the fake's name
		azuretest.Event{EventID: "for-my-vm", EventType: "Reboot", Resources: []string{"My-VM"}, NotBefore: notBefore},
	)
	nt := h.receive()
	assert.Equal(t, "for-my-vm", nt.Event)
	h.polls(azuretest.PathScheduledEvents, 2)
	assert.Empty(t, events(h.stopAndDrain()))
	assert.Zero(t, h.srv.Requests(azuretest.PathVMName), "the name was asked for")
}

// The name the metadata service gives is read once, trimmed.
func TestVMNameReadOnce(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetVMName("  spot-7\n") }})
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Preempt", Resources: []string{"spot-7"}, NotBefore: notBefore})
	assert.Equal(t, "e", h.receive().Event)
	h.polls(azuretest.PathScheduledEvents, 3)
	assert.Equal(t, 1, h.srv.Requests(azuretest.PathVMName))
	rec := h.own.WaitFor(t, "azure: watching the scheduled events of this VM", 1)
	assert.Equal(t, "spot-7", testlog.Attr(rec, "vm"))
}

// A document whose DocumentIncarnation has not changed is not looked at
// again, whatever it lists. The fake's SetEvents always moves the
// incarnation, so the same-incarnation documents are served as fault
// bodies.
func TestSameIncarnationIsNotActedOn(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Preempt", NotBefore: notBefore})
	assert.Equal(t, "e1", h.receive().Event)
	inc := h.srv.Incarnation()
	nb := notBefore.Format(http.TimeFormat)

	// The same incarnation with a new event, then with none: no notice,
	// neither the new event nor a Cleared.
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Count: 3,
		Body: doc(inc, event("e1", "Preempt", "Scheduled", nb), event("e2", "Reboot", "Scheduled", nb))})
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Count: 3, Body: doc(inc)})
	h.polls(azuretest.PathScheduledEvents, 7)
	h.quiet()
	assert.NoError(t, h.status().Err, "a same-incarnation document is not an error")

	// The same events in a new incarnation: e2 is news.
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents,
		Body: doc(inc+100, event("e1", "Preempt", "Scheduled", nb), event("e2", "Reboot", "Scheduled", nb))})
	nt := h.receive()
	assert.Equal(t, "e2", nt.Event)
	assert.Equal(t, termsig.Reboot, nt.Kind)
	h.polls(azuretest.PathScheduledEvents, 2)
	h.quiet()

	// Back to the fake's own document (its incarnation differs): e2 is gone.
	h.srv.ClearFaults()
	gone := h.receive()
	assert.Equal(t, termsig.Cleared, gone.Kind)
	assert.Equal(t, "e2", gone.Event)
	h.polls(azuretest.PathScheduledEvents, 2)
	assert.Empty(t, events(h.stopAndDrain()))
}

// Config.Logger gets, at debug level, each notice the source sends (see
// its documentation), and the events of other VMs it skips.
func TestSourceLogsNoticesAtDebug(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(
		azuretest.Event{EventID: "other", EventType: "Preempt", Resources: []string{"other-vm"}, NotBefore: notBefore},
		azuretest.Event{EventID: "mine-1234", EventType: "Preempt", NotBefore: notBefore},
	)
	assert.Equal(t, "mine-1234", h.receive().Event)
	h.n.Stop()
	rec := h.own.WaitFor(t, "azure: an event for other resources", 1)
	assert.Equal(t, "other", testlog.Attr(rec, "event"))
	var logged bool
	for _, r := range h.own.Records("") {
		if r.Level == slog.LevelDebug && strings.Contains(recordText(r), "mine-1234") {
			logged = true
		}
	}
	assert.True(t, logged, "no debug record of the notice in Config.Logger; records: %q", messages(h.own.Records("")))
}
