package gcemeta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/termsig/termsig"
)

// A reading is what one value of a key means.
type reading struct {
	// id names the event; "" means no event. Two readings with the same
	// id are the same event, which is reported once.
	id       string
	value    string // for logs
	kind     termsig.Kind
	reason   string
	deadline time.Time     // known in advance, or zero
	after    time.Duration // if > 0: the deadline is this long after the value was seen
}

// parsePreempted reads instance/preempted: "TRUE" or "FALSE". Anything
// else is an error, never a notice.
func parsePreempted(body []byte) (reading, error) {
	s := strings.TrimSpace(string(body))
	switch {
	case strings.EqualFold(s, "TRUE"):
		return reading{id: "TRUE", value: s, kind: termsig.Terminate, reason: "instance preempted", after: PreemptionNotice}, nil
	case strings.EqualFold(s, "FALSE"):
		return reading{value: s}, nil
	}
	return reading{}, fmt.Errorf("unexpected value %s", quote(s))
}

// parseMaintenanceEvent reads instance/maintenance-event. Its values are
// upper-case words: NONE, MIGRATE_ON_HOST_MAINTENANCE,
// TERMINATE_ON_HOST_MAINTENANCE, SHUTDOWN_ON_HOST_MAINTENANCE (older), and
// FALSE, which has been seen for "no event". An unknown word is reported
// as Maintenance, to err on the side of telling; anything that is not such
// a word (an empty body, an HTML page) is an error.
func parseMaintenanceEvent(body []byte) (reading, error) {
	s := strings.TrimSpace(string(body))
	if !isWord(s) {
		return reading{}, fmt.Errorf("unexpected value %s", quote(s))
	}
	r := reading{id: s, value: s, reason: "host maintenance: " + s}
	switch s {
	case "NONE", "FALSE":
		return reading{value: s, reason: "host maintenance over: " + s}, nil
	case "TERMINATE_ON_HOST_MAINTENANCE", "SHUTDOWN_ON_HOST_MAINTENANCE":
		r.kind, r.after = termsig.Terminate, MaintenanceNotice
	case "MIGRATE_ON_HOST_MAINTENANCE":
		r.kind, r.after = termsig.Maintenance, MaintenanceNotice
	default:
		r.kind, r.reason = termsig.Maintenance, "host maintenance: unknown event "+s
	}
	return r, nil
}

// isWord reports whether s is 1 to 64 of A-Z, 0-9 and '_'.
func isWord(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// An upcoming is the instance/upcoming-maintenance object (?alt=json).
// The metadata server writes its fields in snake_case; the Compute API
// writes the same object in camelCase, which is accepted too.
type upcoming struct {
	Type        string
	Status      string
	WindowStart time.Time
	WindowEnd   time.Time
}

// parseUpcoming reads instance/upcoming-maintenance?alt=json: {} when
// nothing is scheduled, else an object such as
//
//	{"type":"SCHEDULED","maintenance_status":"PENDING",
//	 "window_start_time":"2026-12-01T10:00:00Z",
//	 "window_end_time":"2026-12-01T11:00:00Z","can_reschedule":true}
//
// A window is Maintenance, with its start as the deadline; {} or a
// COMPLETE status means no event. A body that is not a JSON object, a field
// of the wrong type or a time that is not RFC 3339 is an error; so is a
// non-empty object with none of type, status and window start, since it
// cannot be told apart from a format this parser does not know.
func parseUpcoming(body []byte) (reading, error) {
	u, err := decodeUpcoming(body)
	if err != nil {
		return reading{}, err
	}
	if u == (upcoming{}) || strings.EqualFold(u.Status, "COMPLETE") {
		v := "{}"
		if u.Status != "" {
			v = u.Status
		}
		return reading{value: v, reason: "upcoming maintenance cleared: " + v}, nil
	}
	var b strings.Builder
	b.WriteString("upcoming maintenance")
	sep := ": "
	for _, f := range []string{u.Type, u.Status} {
		if f != "" {
			b.WriteString(sep)
			b.WriteString(f)
			sep = ", "
		}
	}
	if !u.WindowStart.IsZero() {
		b.WriteString(sep)
		b.WriteString("window from ")
		b.WriteString(u.WindowStart.UTC().Format(time.RFC3339))
		if !u.WindowEnd.IsZero() {
			b.WriteString(" to ")
			b.WriteString(u.WindowEnd.UTC().Format(time.RFC3339))
		}
	}
	id := strings.Join([]string{u.Type, u.Status, u.WindowStart.UTC().Format(time.RFC3339Nano), u.WindowEnd.UTC().Format(time.RFC3339Nano)}, "|")
	return reading{id: id, value: id, kind: termsig.Maintenance, reason: b.String(), deadline: u.WindowStart}, nil
}

func decodeUpcoming(body []byte) (upcoming, error) {
	var u upcoming
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return u, fmt.Errorf("not a JSON object: %s", quote(string(trimmed)))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return u, fmt.Errorf("bad JSON: %w", err)
	}
	if len(obj) == 0 {
		return u, nil
	}
	str := func(names ...string) (string, error) {
		for _, n := range names {
			raw, ok := obj[n]
			if !ok {
				continue
			}
			var s *string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", fmt.Errorf("field %s is not a string", n)
			}
			if s != nil {
				return strings.TrimSpace(*s), nil
			}
		}
		return "", nil
	}
	tm := func(names ...string) (time.Time, error) {
		s, err := str(names...)
		if err != nil || s == "" {
			return time.Time{}, err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("field %s is not an RFC 3339 time: %s", names[0], quote(s))
		}
		return t, nil
	}
	var errs [4]error
	u.Type, errs[0] = str("type")
	u.Status, errs[1] = str("maintenance_status", "maintenanceStatus")
	u.WindowStart, errs[2] = tm("window_start_time", "windowStartTime")
	u.WindowEnd, errs[3] = tm("window_end_time", "windowEndTime")
	if err := errors.Join(errs[:]...); err != nil {
		return upcoming{}, err
	}
	if u.Type == "" && u.Status == "" && u.WindowStart.IsZero() {
		return upcoming{}, fmt.Errorf("no type, maintenance_status or window_start_time in %s", quote(string(trimmed)))
	}
	for _, f := range []string{u.Type, u.Status} {
		if f != "" && !isWord(f) {
			return upcoming{}, fmt.Errorf("unexpected word %s", quote(f))
		}
	}
	return u, nil
}

// quote quotes the start of an unexpected value for an error message.
func quote(s string) string {
	const n = 64
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
