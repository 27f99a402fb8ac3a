package gcemeta

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// Payloads as the metadata server sends them. The values of preempted and
// maintenance-event are those Google documents; the upcoming-maintenance
// objects have the documented fields (snake_case from the metadata server,
// camelCase as in the Compute API's UpcomingMaintenance resource).
var (
	preemptedSeeds   = []string{"TRUE", "FALSE", "TRUE\n", " FALSE ", "true", ""}
	maintenanceSeeds = []string{
		"NONE", "MIGRATE_ON_HOST_MAINTENANCE", "TERMINATE_ON_HOST_MAINTENANCE",
		"SHUTDOWN_ON_HOST_MAINTENANCE", "FALSE", "NONE\n", "",
	}
	upcomingSeeds = []string{
		`{}`,
		"{}\n",
		`{"can_reschedule":true,"latest_window_start_time":"2026-12-08T10:00:00Z","maintenance_status":"PENDING","type":"SCHEDULED","window_end_time":"2026-12-01T11:00:00Z","window_start_time":"2026-12-01T10:00:00Z"}`,
		`{"can_reschedule":false,"maintenance_status":"ONGOING","type":"UNSCHEDULED","window_end_time":"2026-12-01T11:00:00.123-08:00","window_start_time":"2026-12-01T10:00:00-08:00"}`,
		`{"maintenance_status":"COMPLETE","type":"SCHEDULED","window_end_time":"2026-12-01T11:00:00Z","window_start_time":"2026-12-01T10:00:00Z"}`,
		`{"type":"SCHEDULED","canReschedule":true,"windowStartTime":"2026-12-01T10:00:00Z","windowEndTime":"2026-12-01T11:00:00Z","latestWindowStartTime":"2026-12-08T10:00:00Z","maintenanceStatus":"PENDING","maintenanceOnShutdown":false,"maintenanceReasons":["INFRASTRUCTURE_RELOCATION"]}`,
	}
	garbageSeeds = []string{
		"<!DOCTYPE html><html><body>TRUE</body></html>", "null", "[]", `{"type":5}`,
		`{"type":"SCHEDULED","window_start_time":"soon"}`, "\x00\xff", `{"a":`,
	}
)

func FuzzParsePreempted(f *testing.F) {
	for _, s := range append(preemptedSeeds, garbageSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parsePreempted(body)
		isTrue := strings.EqualFold(strings.TrimSpace(string(body)), "TRUE")
		isFalse := strings.EqualFold(strings.TrimSpace(string(body)), "FALSE")
		if err != nil {
			if isTrue || isFalse {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if r.id != "" && (!isTrue || r.kind != termsig.Terminate) {
			t.Fatalf("%q: event %+v", body, r)
		}
		if r.id == "" && !isFalse {
			t.Fatalf("%q: no event, yet not FALSE", body)
		}
	})
}

func FuzzParseMaintenanceEvent(f *testing.F) {
	for _, s := range append(maintenanceSeeds, garbageSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseMaintenanceEvent(body)
		v := strings.TrimSpace(string(body))
		if err != nil {
			if isWord(v) {
				t.Fatalf("%q: a word was refused: %v", body, err)
			}
			return
		}
		if !isWord(v) {
			t.Fatalf("%q: accepted", body)
		}
		switch {
		case r.id == "":
			if v != "NONE" && v != "FALSE" {
				t.Fatalf("%q: no event", body)
			}
		case r.kind == termsig.Terminate:
			if v != "TERMINATE_ON_HOST_MAINTENANCE" && v != "SHUTDOWN_ON_HOST_MAINTENANCE" {
				t.Fatalf("%q: terminate", body)
			}
		case r.kind != termsig.Maintenance:
			t.Fatalf("%q: kind %v", body, r.kind)
		}
		if !strings.Contains(r.reason, v) {
			t.Fatalf("%q: reason %q lacks the value", body, r.reason)
		}
	})
}

func FuzzParseUpcoming(f *testing.F) {
	for _, s := range append(upcomingSeeds, garbageSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseUpcoming(body)
		if err != nil {
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("%q: error is not UTF-8: %q", body, err)
			}
			return
		}
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			t.Fatalf("%q: accepted", body)
		}
		if r.id != "" && r.kind != termsig.Maintenance {
			t.Fatalf("%q: kind %v: upcoming maintenance is never imminent", body, r.kind)
		}
		// The same payload means the same event: it is reported once.
		again, err := parseUpcoming(body)
		if err != nil || again.id != r.id {
			t.Fatalf("%q: not deterministic", body)
		}
	})
}

func TestParseUpcoming(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, s := range upcomingSeeds {
		r, err := parseUpcoming([]byte(s))
		require.NoError(t, err, s)
		switch i {
		case 0, 1, 4: // {} and COMPLETE
			assert.Empty(t, r.id, s)
		case 3:
			assert.Equal(t, termsig.Maintenance, r.kind)
			assert.True(t, r.deadline.Equal(start.Add(8*time.Hour)), "%v", r.deadline)
			assert.Equal(t, "upcoming maintenance: UNSCHEDULED, ONGOING, window from 2026-12-01T18:00:00Z to 2026-12-01T19:00:00Z", r.reason)
		default:
			assert.Equal(t, termsig.Maintenance, r.kind, s)
			assert.True(t, r.deadline.Equal(start), "%s: %v", s, r.deadline)
			assert.Equal(t, "upcoming maintenance: SCHEDULED, PENDING, window from 2026-12-01T10:00:00Z to 2026-12-01T11:00:00Z", r.reason)
		}
	}
	for _, s := range garbageSeeds {
		_, err := parseUpcoming([]byte(s))
		assert.Error(t, err, s)
	}
	r, err := parseUpcoming([]byte(`{"type":"SCHEDULED"}`))
	require.NoError(t, err)
	assert.True(t, r.deadline.IsZero(), "no window: no deadline")
	assert.Equal(t, "upcoming maintenance: SCHEDULED", r.reason)
}

func TestQuoteCutsLongValues(t *testing.T) {
	long := strings.Repeat("é", 100)
	q := quote(long)
	assert.True(t, utf8.ValidString(q))
	assert.True(t, strings.HasSuffix(q, "…"))
	assert.Less(t, len(q), 80)
}
