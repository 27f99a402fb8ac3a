package imds

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/termsig/termsig"
)

// errBadPayload marks a response whose body cannot be what IMDS sends: it is
// a fault of the path to IMDS (a proxy's HTML page, a cut-off body), never a
// notice.
var errBadPayload = errors.New("invalid payload")

func badPayload(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadPayload, fmt.Sprintf(format, args...))
}

// decodeObject decodes body, which must be one JSON object and nothing more,
// into v.
func decodeObject(body []byte, v any) error {
	trimmed := strings.TrimSpace(string(body))
	if !strings.HasPrefix(trimmed, "{") {
		return badPayload("not a JSON object: %q", abbrev(body))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return badPayload("%v: %q", err, abbrev(body))
	}
	if dec.More() {
		return badPayload("trailing data: %q", abbrev(body))
	}
	return nil
}

// abbrev returns at most 64 bytes of b, for error messages.
func abbrev(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// spotAction is a parsed spot/instance-action document.
type spotAction struct {
	Kind     termsig.Kind
	Action   string // as sent, lower case
	Deadline time.Time
}

// parseInstanceAction parses spot/instance-action:
// {"action": "terminate"|"stop"|"hibernate", "time": "2017-09-18T08:22:00Z"}.
// An unknown action is an error, not a notice. A missing or unreadable time
// leaves Deadline zero: the action alone is reason enough to leave. That
// includes a time that is not a string (a number, an object, null), which
// is why Time is decoded on its own: as a string field, it would fail the
// whole document.
func parseInstanceAction(body []byte) (spotAction, error) {
	var doc struct {
		Action *string         `json:"action"`
		Time   json.RawMessage `json:"time"`
	}
	if err := decodeObject(body, &doc); err != nil {
		return spotAction{}, err
	}
	if doc.Action == nil {
		return spotAction{}, badPayload("no action: %q", abbrev(body))
	}
	a := spotAction{Action: strings.ToLower(*doc.Action)}
	switch a.Action {
	case "terminate":
		a.Kind = termsig.Terminate
	case "stop":
		a.Kind = termsig.Stop
	case "hibernate":
		a.Kind = termsig.Hibernate
	default:
		return spotAction{}, badPayload("unknown action %q", *doc.Action)
	}
	var at string
	if json.Unmarshal(doc.Time, &at) == nil {
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			a.Deadline = t
		}
	}
	return a, nil
}

// parseRebalance parses events/recommendations/rebalance:
// {"noticeTime": "2020-10-27T08:22:00Z"}. The time is informative only; an
// unreadable one is kept as text.
// A document that is an object is a recommendation, whatever its
// noticeTime holds (a string, as documented, or something else): the
// time only goes into the Reason, and a recommendation must not be
// missed because its time cannot be read.
func parseRebalance(body []byte) (noticeTime string, err error) {
	var doc struct {
		NoticeTime json.RawMessage `json:"noticeTime"`
	}
	if err := decodeObject(body, &doc); err != nil {
		return "", err
	}
	var t string
	if json.Unmarshal(doc.NoticeTime, &t) != nil || t == "" {
		return "unknown", nil
	}
	return t, nil
}

// scheduledEvent is one entry of events/maintenance/scheduled.
type scheduledEvent struct {
	Code        string `json:"Code"`
	Description string `json:"Description"`
	EventID     string `json:"EventId"`
	NotBefore   string `json:"NotBefore"`
	NotAfter    string `json:"NotAfter"` // may be missing
	State       string `json:"State"`
}

// active reports whether the event is still to come or under way, as
// opposed to canceled or completed.
func (e scheduledEvent) active() bool {
	switch strings.ToLower(e.State) {
	case "canceled", "cancelled", "completed":
		return false
	}
	return true
}

// parseScheduled parses events/maintenance/scheduled, a JSON array (maybe
// empty) of events. Every event must carry an EventId, so that a later
// absence can be told from a parse error.
func parseScheduled(body []byte) ([]scheduledEvent, error) {
	trimmed := strings.TrimSpace(string(body))
	if !strings.HasPrefix(trimmed, "[") {
		return nil, badPayload("not a JSON array: %q", abbrev(body))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	var evs []scheduledEvent
	if err := dec.Decode(&evs); err != nil {
		return nil, badPayload("%v: %q", err, abbrev(body))
	}
	if dec.More() {
		return nil, badPayload("trailing data: %q", abbrev(body))
	}
	for _, e := range evs {
		if e.EventID == "" {
			return nil, badPayload("event without EventId: %q", abbrev(body))
		}
	}
	return evs, nil
}

// parseEventTime parses a scheduled-event time such as
// "21 Jan 2019 09:00:43 GMT". It returns the zero time if s is unreadable.
func parseEventTime(s string) time.Time {
	for _, layout := range []string{"2 Jan 2006 15:04:05 MST", "02 Jan 2006 15:04:05 MST", time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// parseLifecycle parses autoscaling/target-lifecycle-state, a word such as
// "InService", "Terminated" or "Warmed:Stopped". Anything that is not such a
// word (an HTML page, an empty body) is an error.
func parseLifecycle(body []byte) (string, error) {
	s := strings.TrimSpace(string(body))
	if s == "" || len(s) > 64 {
		return "", badPayload("not a lifecycle state: %q", abbrev(body))
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && r != ':' && r != '-' {
			return "", badPayload("not a lifecycle state: %q", abbrev(body))
		}
	}
	return s, nil
}
