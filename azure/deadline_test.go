package azure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// preempt is a document with one Preempt of the VM "vm", due at nb.
func preempt(nb string) string {
	return `{"DocumentIncarnation":1,"Events":[{"EventId":"E","EventType":"Preempt","ResourceType":"VirtualMachine",` +
		`"Resources":["vm"],"EventStatus":"Scheduled","NotBefore":"` + nb + `"}]}`
}

// NotBefore as Azure documents it today (RFC 1123, GMT) and as it did in
// 2017 and Microsoft's mock server writes it (RFC 3339), and a few close
// spellings of the two, all give the deadline they name.
func TestNotBeforeFormatsGiveTheDeadline(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	want := time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC)
	for _, nb := range []string{
		"Mon, 30 Nov 2026 10:02:00 GMT",   // RFC 1123, as the documentation shows it
		"Mon, 30 Nov 2026 10:02:00 UTC",   // RFC 1123 with another name for UTC
		"Mon, 30 Nov 2026 10:02:00 +0000", // RFC 1123 with a numeric zone
		"Mon, 30 Nov 2026 11:02:00 +0100",
		"2026-11-30T10:02:00Z",      // RFC 3339
		"2026-11-30T10:02:00.000Z",  // RFC 3339 with fractions
		"2026-11-30T12:02:00+02:00", // RFC 3339 with an offset
		"2026-11-30T10:02:00+0000",  // ISO 8601 with a basic offset
		"2026-11-30T10:02:00.5+0000",
	} {
		t.Run(nb, func(t *testing.T) {
			doc, err := parseDocument([]byte(preempt(nb)))
			require.NoError(t, err)
			got, problem := newWatched().update(doc, "vm", map[string]string{}, now, discard)
			require.NoError(t, problem)
			require.Len(t, got, 1)
			assert.Equal(t, termsig.Terminate, got[0].Kind)
			assert.True(t, want.Equal(got[0].Deadline.Truncate(time.Second)), "deadline %v", got[0].Deadline)
		})
	}
}

// A NotBefore that names no time, or a time that cannot be this event's
// (long before it was seen, or years ahead), is no deadline: the Terminate
// goes out without one, and Status says why.
func TestImplausibleNotBeforeIsNoDeadline(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ nb, want string }{
		{"Mon, 01 Jan 0001 00:00:00 GMT", `azure: event E: NotBefore "Mon, 01 Jan 0001 00:00:00 GMT" is long before the event was seen`},
		{"0001-01-01T00:00:00Z", `azure: event E: NotBefore "0001-01-01T00:00:00Z" is long before the event was seen`},
		{"Thu, 01 Jan 1970 00:00:00 GMT", `azure: event E: NotBefore "Thu, 01 Jan 1970 00:00:00 GMT" is long before the event was seen`},
		{"Sun, 29 Nov 2026 09:00:00 GMT", `azure: event E: NotBefore "Sun, 29 Nov 2026 09:00:00 GMT" is long before the event was seen`},
		{"Fri, 31 Dec 9999 23:59:59 GMT", `azure: event E: NotBefore "Fri, 31 Dec 9999 23:59:59 GMT" is too far ahead`},
		{"2027-11-30T10:00:00Z", `azure: event E: NotBefore "2027-11-30T10:00:00Z" is too far ahead`},
		{"tomorrow", `azure: event E: NotBefore "tomorrow" is not an RFC 1123 or RFC 3339 time`},
		{"Mon, 30 Nov 2026 10:02:00", `azure: event E: NotBefore "Mon, 30 Nov 2026 10:02:00" is not an RFC 1123 or RFC 3339 time`},
	} {
		t.Run(tc.nb, func(t *testing.T) {
			doc, err := parseDocument([]byte(preempt(tc.nb)))
			require.NoError(t, err)
			got, problem := newWatched().update(doc, "vm", map[string]string{}, now, discard)
			require.Len(t, got, 1, "the Terminate is sent")
			assert.Equal(t, termsig.Terminate, got[0].Kind)
			assert.True(t, got[0].Deadline.IsZero(), "deadline %v", got[0].Deadline)
			assert.EqualError(t, problem, tc.want)
		})
	}
}

// A NotBefore a little in the past (a late start, the VM's clock ahead)
// is the deadline: the event may start at any moment.
func TestRecentNotBeforeIsTheDeadline(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	doc, err := parseDocument([]byte(preempt("Mon, 30 Nov 2026 09:59:00 GMT")))
	require.NoError(t, err)
	got, problem := newWatched().update(doc, "vm", map[string]string{}, now, discard)
	require.NoError(t, problem)
	require.Len(t, got, 1)
	assert.Equal(t, now.Add(-time.Minute), got[0].Deadline)
}

// A Started event may keep its NotBefore (Microsoft's mock server does):
// one that started two hours ago, seen by a source started since, is due
// now, and its NotBefore is no problem.
func TestStartedEventWithOldNotBeforeIsDueNow(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	doc, err := parseDocument([]byte(`{"DocumentIncarnation":1,"Events":[{"EventId":"E","EventType":"Freeze","ResourceType":"VirtualMachine",` +
		`"Resources":["vm"],"EventStatus":"Started","NotBefore":"Mon, 30 Nov 2026 08:00:00 GMT"}]}`))
	require.NoError(t, err)
	got, problem := newWatched().update(doc, "vm", map[string]string{}, now, discard)
	require.Len(t, got, 1)
	assert.Equal(t, now, got[0].Deadline, "under way: due now")
	assert.NoError(t, problem, "a Started event's NotBefore is when it started: in the past is expected")
}
