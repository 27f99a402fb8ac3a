package azure

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// entry is one event of the VM "vm" as JSON.
func entry(id, typ, status, nb string) string {
	return `{"EventId":"` + id + `","EventType":"` + typ + `","ResourceType":"VirtualMachine","Resources":["vm"],` +
		`"EventStatus":"` + status + `","NotBefore":"` + nb + `"}`
}

func document1(entries ...string) []byte {
	return []byte(`{"DocumentIncarnation":1,"Events":[` + strings.Join(entries, ",") + `]}`)
}

// An EventId longer than a notice's Event carries is still this VM's
// event: its notice goes out, under a shorter Event that stays the same
// while the event does, and Release acknowledges it under its own id.
func TestLongEventIDIsReported(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 300)
	doc, err := parseDocument(document1(entry(long, "Preempt", "Scheduled", "Mon, 30 Nov 2026 10:00:30 GMT")))
	require.NoError(t, err)
	s := newWatched()
	seen := map[string]string{}
	got, problem := s.update(doc, "vm", seen, now, discard)
	require.Len(t, got, 1, "the Preempt is reported")
	assert.Equal(t, termsig.Terminate, got[0].Kind)
	assert.LessOrEqual(t, len(got[0].Event), maxEventID)
	assert.True(t, strings.HasPrefix(got[0].Event, "xxxx"), "Event %q", got[0].Event)
	assert.ErrorContains(t, problem, "EventId of 300 bytes")
	assert.Equal(t, long, s.current[got[0].Event].id, "acknowledged under its own id")

	again, _ := s.update(doc, "vm", seen, now.Add(time.Second), discard)
	assert.Empty(t, again, "the same event again")

	other := strings.Repeat("x", 299) + "y" // differs past the cut
	doc2, err := parseDocument(document1(entry(long, "Preempt", "Scheduled", "Mon, 30 Nov 2026 10:00:30 GMT"),
		entry(other, "Reboot", "Scheduled", "Mon, 30 Nov 2026 10:15:00 GMT")))
	require.NoError(t, err)
	two, _ := s.update(doc2, "vm", seen, now.Add(2*time.Second), discard)
	require.Len(t, two, 1)
	assert.Equal(t, termsig.Reboot, two[0].Kind)
	assert.NotEqual(t, got[0].Event, two[0].Event, "two long ids, two events")
}

// An EventId listed twice is one event: the entry that matters most is
// reported, whichever comes first, so that a Freeze does not hide a
// Preempt of the same id.
func TestRepeatedEventIDTakesTheStrongestEntry(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	const nb = "Mon, 30 Nov 2026 10:15:00 GMT"
	for _, tc := range []struct {
		name    string
		entries []string
		kind    termsig.Kind
		reason  string
	}{
		{"Freeze then Preempt", []string{entry("E", "Freeze", "Scheduled", nb), entry("E", "Preempt", "Scheduled", nb)}, termsig.Terminate, "Preempt scheduled"},
		{"Preempt then Freeze", []string{entry("E", "Preempt", "Scheduled", nb), entry("E", "Freeze", "Scheduled", nb)}, termsig.Terminate, "Preempt scheduled"},
		{"Freeze then Reboot", []string{entry("E", "Freeze", "Scheduled", nb), entry("E", "Reboot", "Scheduled", nb)}, termsig.Reboot, "Reboot scheduled"},
		{"unknown type then Preempt", []string{entry("E", "Explode", "Scheduled", nb), entry("E", "Preempt", "Scheduled", nb)}, termsig.Terminate, "Preempt scheduled"},
		{"Scheduled then Started", []string{entry("E", "Reboot", "Scheduled", nb), entry("E", "Reboot", "Started", "")}, termsig.Reboot, "Reboot started"},
		{"Started then Scheduled", []string{entry("E", "Reboot", "Started", ""), entry("E", "Reboot", "Scheduled", nb)}, termsig.Reboot, "Reboot started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := parseDocument(document1(tc.entries...))
			require.NoError(t, err)
			got, problem := newWatched().update(doc, "vm", map[string]string{}, now, discard)
			require.NoError(t, problem)
			require.Len(t, got, 1)
			assert.Equal(t, tc.kind, got[0].Kind)
			assert.Equal(t, tc.reason, got[0].Reason)
		})
	}
}
