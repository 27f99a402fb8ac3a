package azure

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/termsig/termsig"
)

// A document is the scheduled-events answer.
type document struct {
	Incarnation int64
	Events      []event
}

// An event is one scheduled event as the service sends it.
type event struct {
	EventID           string   `json:"EventId"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	EventStatus       string   `json:"EventStatus"`
	NotBefore         string   `json:"NotBefore"`
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"`
	DurationInSeconds int64    `json:"DurationInSeconds"`

	raw json.RawMessage // as received, for Notice.Raw
}

// maxEvents bounds the events of one document that are looked at; Azure
// lists a handful at most.
const maxEvents = 1000

// maxRaw bounds Notice.Raw.
const maxRaw = 4 << 10

// errNotDocument is an answer that parses as JSON but is not a
// scheduled-events document.
var errNotDocument = errors.New("answer is not a scheduled-events document (no DocumentIncarnation or Events)")

// parseDocument reads a scheduled-events document. It is strict about
// the shape (DocumentIncarnation and Events must be there), so that a
// JSON answer from something else is an error, not "no events".
func parseDocument(body []byte) (document, error) {
	doc, raws, err := parseHead(body)
	if err != nil {
		return document{}, err
	}
	doc.Events, err = parseEvents(raws)
	return doc, err
}

// parseHead reads the document's shape and DocumentIncarnation, leaving
// its events unread: an unchanged incarnation needs nothing more.
func parseHead(body []byte) (document, []json.RawMessage, error) {
	var d struct {
		Incarnation *int64             `json:"DocumentIncarnation"`
		Events      *[]json.RawMessage `json:"Events"`
	}
	if err := strictKeys(body, docKeys); err != nil {
		return document{}, nil, err
	}
	if err := json.Unmarshal(body, &d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return document{}, nil, fmt.Errorf("%w: %w", errNotDocument, shorten(err))
		}
		return document{}, nil, fmt.Errorf("answer is not JSON: %w", shorten(err))
	}
	if d.Incarnation == nil || d.Events == nil {
		return document{}, nil, errNotDocument
	}
	if len(*d.Events) > maxEvents {
		return document{}, nil, fmt.Errorf("answer lists %d events (more than %d)", len(*d.Events), maxEvents)
	}
	return document{Incarnation: *d.Incarnation}, *d.Events, nil
}

// parseEvents reads the events of a document.
func parseEvents(raws []json.RawMessage) ([]event, error) {
	events := make([]event, 0, len(raws))
	for i, raw := range raws {
		var e event
		if err := strictKeys(raw, eventKeys); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("event %d is not an event: %w", i, shorten(err))
		}
		e.raw = raw
		events = append(events, e)
	}
	return events, nil
}

// The keys of a document and of an event, as Azure spells them.
var (
	docKeys   = []string{"DocumentIncarnation", "Events"}
	eventKeys = []string{"EventId", "EventType", "ResourceType", "Resources", "EventStatus", "NotBefore", "Description", "EventSource", "DurationInSeconds"}
)

// strictKeys checks the keys of the JSON object in raw against known:
// encoding/json would take "eventtype" for EventType, and the last of two
// such keys, so a key that is one of known in another case, or a known
// key twice, is an error. Other keys (fields Azure may add) are let be.
// Anything but an object is left to json.Unmarshal to refuse.
func strictKeys(raw []byte, known []string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil // json.Unmarshal says what is wrong
		}
		key, _ := t.(string)
		for _, k := range known {
			switch {
			case key == k && seen[k]:
				return fmt.Errorf("%w: %q twice", errNotDocument, k)
			case key == k:
				seen[k] = true
			case strings.EqualFold(key, k):
				return fmt.Errorf("%w: %q is not spelled %q", errNotDocument, clip(key), k)
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// shorten keeps a JSON error's text short and stable.
func shorten(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errors.New("syntax error")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("a JSON %s", te.Value)
		}
		return fmt.Errorf("%s is a JSON %s", te.Field, te.Value)
	}
	return err
}

// The event types and what each is to the VM.
var kinds = map[string]termsig.Kind{
	"Preempt":   termsig.Terminate, // a spot VM evicted
	"Terminate": termsig.Terminate, // the VM deleted (scale-in, user)
	"Redeploy":  termsig.Terminate, // moved to another host: its disk's temporary data lost
	"Reboot":    termsig.Reboot,
	"Freeze":    termsig.Maintenance, // paused for seconds, memory kept
}

// forVM reports whether e concerns the VM named vm. Names compare without
// regard to case, as Azure's resource names do.
func (e event) forVM(vm string) bool {
	if e.ResourceType != "" && !strings.EqualFold(e.ResourceType, "VirtualMachine") {
		return false
	}
	for _, r := range e.Resources {
		if strings.EqualFold(r, vm) {
			return true
		}
	}
	return false
}

// check returns why e cannot be reported, or nil.
func (e event) check() error {
	switch {
	case e.EventID == "":
		return errors.New("azure: an event without an EventId")
	case kinds[e.EventType] == 0:
		return fmt.Errorf("azure: event %s: unknown EventType %q", clip(e.EventID), clip(e.EventType))
	case e.EventStatus != "Scheduled" && e.EventStatus != "Started":
		return fmt.Errorf("azure: event %s: unknown EventStatus %q", clip(e.EventID), clip(e.EventStatus))
	}
	return nil
}

// maxEventID bounds Notice.Event. Azure's EventIds are GUIDs (36 bytes).
const maxEventID = 256

// key returns the Event of e's notices: its EventId, or, for an EventId
// longer than maxEventID, a prefix of it and a digest of the whole, so
// that two long ids stay two events. Release acknowledges the EventId
// itself (tracked.id).
func (e event) key() string {
	if len(e.EventID) <= maxEventID {
		return e.EventID
	}
	sum := sha256.Sum256([]byte(e.EventID))
	digest := hex.EncodeToString(sum[:8])
	cut := maxEventID - len("…") - len(digest)
	for cut > 0 && !utf8.RuneStart(e.EventID[cut]) {
		cut--
	}
	return e.EventID[:cut] + "…" + digest
}

// strength orders the entries of one EventId listed more than once: one
// that can be reported beats one that cannot, a Terminate a Reboot, a
// Reboot a Freeze, and a Started entry a Scheduled one of its kind (it is
// under way). The strongest is the event, so that a Freeze listed first
// does not hide a Preempt of the same id.
func (e event) strength() int {
	if e.check() != nil {
		return 0
	}
	s := map[termsig.Kind]int{termsig.Maintenance: 1, termsig.Reboot: 2, termsig.Terminate: 3}[kinds[e.EventType]] * 2
	if e.EventStatus == "Started" {
		s++
	}
	return s
}

// clip shortens an outside string for an error text.
func clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// NotBefore is RFC 1123 in GMT in Azure's documentation ("Mon, 19 Sep
// 2016 18:29:47 GMT"), and was RFC 3339 in its 2017 documentation
// ("2016-09-19T18:29:47Z"), as Microsoft's mock server still writes it.
// These layouts read both, and the spellings close to them: RFC 1123
// with UTC or a numeric zone, ISO 8601 with a basic offset ("+0000").
var notBeforeLayouts = []string{
	http.TimeFormat,
	"Mon, 02 Jan 2006 15:04:05 UTC",
	time.RFC1123Z,
	time.RFC3339Nano, // fractions optional
	"2006-01-02T15:04:05.999999999Z0700",
}

// A NotBefore outside these bounds around the time its event was seen is
// not taken as a deadline: the clocks of the VM and of Azure may differ,
// and a Scheduled event may linger a little past NotBefore, but Azure
// announces events minutes ahead (15 at most for Freeze, Reboot,
// Terminate; 30 s for Preempt), never days, and a time long past is not
// one an event still Scheduled waits for.
const (
	maxNotBeforePast  = time.Hour
	maxNotBeforeAhead = 7 * 24 * time.Hour
)

// notBefore returns the deadline NotBefore gives for e seen at now: the
// zero time if it is empty (once the event has started), now for an
// event that started long ago, and the zero time and an error if it is
// not a time (see notBeforeLayouts) or not a plausible one (see
// maxNotBeforePast): a Terminate without a deadline is still a Terminate.
func (e event) notBefore(now time.Time) (time.Time, error) {
	if e.NotBefore == "" {
		return time.Time{}, nil
	}
	for _, layout := range notBeforeLayouts {
		t, err := time.Parse(layout, e.NotBefore)
		if err != nil {
			continue
		}
		switch {
		case t.Before(now.Add(-maxNotBeforePast)) && e.EventStatus == "Started":
			// When it started: an event under way has no time left.
			return now.UTC(), nil
		case t.Before(now.Add(-maxNotBeforePast)):
			return time.Time{}, fmt.Errorf("azure: event %s: NotBefore %q is long before the event was seen", clip(e.EventID), clip(e.NotBefore))
		case t.After(now.Add(maxNotBeforeAhead)):
			return time.Time{}, fmt.Errorf("azure: event %s: NotBefore %q is too far ahead", clip(e.EventID), clip(e.NotBefore))
		}
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("azure: event %s: NotBefore %q is not an RFC 1123 or RFC 3339 time", clip(e.EventID), clip(e.NotBefore))
}

// notice is the notice of e, seen at now, due at deadline.
func (e event) notice(now, deadline time.Time) termsig.Notice {
	raw := string(e.raw)
	if len(raw) > maxRaw {
		cut := maxRaw
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		raw = raw[:cut]
	}
	reason := e.EventType + " " + strings.ToLower(e.EventStatus)
	if d := strings.TrimSpace(e.Description); d != "" {
		reason += ": " + clip(d)
	}
	return termsig.Notice{
		Kind:     kinds[e.EventType],
		Event:    e.key(),
		Reason:   reason,
		Deadline: deadline,
		Observed: now,
		Raw:      raw,
	}
}

// maxVMName bounds a VM's resource name: Azure's naming rules give 64
// characters ("Naming rules and restrictions for Azure resources",
// Microsoft.Compute/virtualMachines: the 15-character limit of Windows is
// its host name's), and a scale set instance's name, "{scale set}_{id}",
// is held to 64 too.
const maxVMName = 64

// validVMName reports whether name can be an Azure VM's resource name, by
// Azure's rules: at most 64 characters, letters, digits, hyphens,
// underscores and periods (spaces, control characters and the other
// punctuation are refused), not starting with an underscore, not ending
// with a period or a hyphen. Underscores are allowed, though the rules
// refuse them in host names, because instance names have them
// ("myScaleSet_0", Microsoft's "WestNO_0").
func validVMName(name string) bool {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxVMName ||
		name[0] == '_' || strings.HasSuffix(name, ".") || strings.HasSuffix(name, "-") {
		return false
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' && r != '.' {
			return false
		}
	}
	return true
}
