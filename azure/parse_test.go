package azure

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
)

// Documents as Microsoft's documentation of Scheduled Events shows them
// ("Azure Metadata Service: Scheduled Events for Linux VMs",
// learn.microsoft.com/azure/virtual-machines/linux/scheduled-events), in
// its own layout, written out as valid JSON (the schema there has
// trailing commas), and the names of the VMs they concern.
var docSeeds = []string{
	// A Freeze for two VMs of an availability set, then the same event
	// under way (NotBefore emptied), then the document once it is over.
	`{
    "DocumentIncarnation":  1,
    "Events":  [
                   {
                       "EventId":  "A123BC45-1234-5678-AB90-ABCDEF123456",
                       "EventStatus":  "Scheduled",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "Mon, 11 Apr 2022 22:26:58 GMT",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  5
                   }
               ]
}`,
	`{
    "DocumentIncarnation":  2,
    "Events":  [
                   {
                       "EventId":  "A123BC45-1234-5678-AB90-ABCDEF123456",
                       "EventStatus":  "Started",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  5
                   }
               ]
}`,
	`{
    "DocumentIncarnation":  3,
    "Events":  [

               ]
}`,
	// The older example: a Reboot for a front end and a back end.
	`{
 "DocumentIncarnation": 1,
 "Events": [
  {
   "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
   "EventType": "Reboot",
   "ResourceType": "VirtualMachine",
   "Resources": ["FrontEnd_IN_0", "BackEnd_IN_0"],
   "EventStatus": "Scheduled",
   "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
   "Description": "",
   "EventSource": "Platform",
   "DurationInSeconds": -1
  }
 ]
}`,
	// A spot VM's eviction.
	`{"DocumentIncarnation":1,"Events":[{"EventId":"B5C3A2E1-7F0D-4A1B-9C8E-1D2F3A4B5C6D","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"Tue, 05 Mar 2024 17:12:20 GMT","Description":"","EventSource":"Platform","DurationInSeconds":-1}]}`,
	// Several events for several VMs: a user's Redeploy, a Terminate
	// (scale-in) and a Reboot under way.
	`{"DocumentIncarnation":7,"Events":[` +
		`{"EventId":"C1","EventType":"Redeploy","ResourceType":"VirtualMachine","Resources":["WestNO_0"],"EventStatus":"Scheduled","NotBefore":"Mon, 11 Apr 2022 22:36:58 GMT","Description":"Virtual machine is being redeployed.","EventSource":"User","DurationInSeconds":-1},` +
		`{"EventId":"C2","EventType":"Terminate","ResourceType":"VirtualMachine","Resources":["myspotvm","FrontEnd_IN_0"],"EventStatus":"Scheduled","NotBefore":"Mon, 11 Apr 2022 22:31:58 GMT","Description":"","EventSource":"User","DurationInSeconds":-1},` +
		`{"EventId":"C3","EventType":"Reboot","ResourceType":"VirtualMachine","Resources":["BackEnd_IN_0"],"EventStatus":"Started","NotBefore":"","Description":"Virtual machine is going to be restarted as requested by authorized user.","EventSource":"User","DurationInSeconds":-1}]}`,
}

// garbageSeeds are answers that are not documents.
var garbageSeeds = []string{
	"", "null", "[]", "{}", `{"Events":null}`, `{"DocumentIncarnation":1}`, `{"DocumentIncarnation":"1","Events":[]}`,
	`{"DocumentIncarnation":1,"Events":[null,1,"x"]}`, `{"DocumentIncarnation":1,"Events":[{"EventId":5}]}`,
	"<html><body>Welcome</body></html>", `{"DocumentIncarnation": 5, "Events": [{"EventId": "x"`, "\x00\xff",
	`{"DocumentIncarnation":1,"Events":[{"EventId":"E","EventType":"Preempt","ResourceType":"Disk","Resources":["WestNO_0"],"EventStatus":"Scheduled","NotBefore":"soon"}]}`,
	`{"DocumentIncarnation":1,"Events":[{"EventId":"E","EventType":"Preempt","Resources":["westno_0"],"EventStatus":"Started","NotBefore":"Mon, 11 Apr 2022 22:36:58 GMT"}]}`,
}

// edgeSeeds are documents that once lost or weakened a notice: a long
// EventId, an EventId listed twice (the Preempt second), NotBefore in
// RFC 3339 (as Microsoft's 2017 documentation and mock server write it),
// in ISO 8601 with a basic offset, in year 1 and in year 9999.
var edgeSeeds = []string{
	`{"DocumentIncarnation":1,"Events":[{"EventId":"` + strings.Repeat("L", 300) + `","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"Mon, 30 Nov 2026 10:00:30 GMT"}]}`,
	`{"DocumentIncarnation":1,"Events":[` +
		`{"EventId":"D","EventType":"Freeze","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"Mon, 30 Nov 2026 10:15:00 GMT"},` +
		`{"EventId":"D","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"Mon, 30 Nov 2026 10:00:30 GMT"}]}`,
	`{"DocumentIncarnation":1,"Events":[{"EventId":"R","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"2026-11-30T10:00:30Z"}]}`,
	`{"DocumentIncarnation":1,"Events":[{"EventId":"I","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"2026-11-30T10:00:30+0000"}]}`,
	`{"DocumentIncarnation":1,"Events":[{"EventId":"Y1","EventType":"Terminate","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"Mon, 01 Jan 0001 00:00:00 GMT"}]}`,
	`{"DocumentIncarnation":1,"Events":[{"EventId":"Y9","EventType":"Terminate","ResourceType":"VirtualMachine","Resources":["myspotvm"],"EventStatus":"Scheduled","NotBefore":"Fri, 31 Dec 9999 23:59:59 GMT"}]}`,
}

// vms are the VM names the fuzz test watches for: each seed names some.
var vms = []string{"WestNO_0", "FrontEnd_IN_0", "BackEnd_IN_0", "myspotvm"}

var discard = slog.New(slog.DiscardHandler)

func newWatched() *Source {
	s := New(Config{})
	s.current, s.acked = map[string]tracked{}, map[string]uint64{}
	return s
}

// names reports whether some event of doc with id (its notices' Event) concerns vm, as the
// documentation says: Resources name it in any case, and ResourceType, if
// any, is VirtualMachine.
func names(doc document, id, vm string) bool {
	for _, e := range doc.Events {
		if e.key() != id || (e.ResourceType != "" && !strings.EqualFold(e.ResourceType, "VirtualMachine")) {
			continue
		}
		for _, r := range e.Resources {
			if strings.EqualFold(r, vm) {
				return true
			}
		}
	}
	return false
}

func FuzzDocument(f *testing.F) {
	for _, s := range slices.Concat(docSeeds, garbageSeeds, edgeSeeds) {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := parseDocument(body)
		if err != nil {
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("%q: error is not UTF-8: %q", body, err)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("%q: error of %d bytes", body, len(err.Error()))
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("%q: not JSON, yet parsed", body)
		}
		for _, vm := range vms {
			s := newWatched()
			seen := map[string]string{}
			notices, _ := s.update(doc, vm, seen, now, discard)
			reported := map[string]bool{}
			for _, n := range notices {
				switch {
				case n.Source != "":
					t.Fatalf("%q: notice of source %q: Run.Send names the source", body, n.Source)
				case n.Kind != termsig.Terminate && n.Kind != termsig.Reboot && n.Kind != termsig.Maintenance:
					t.Fatalf("%q: first look gave %v for %q", body, n.Kind, n.Event)
				case n.Event == "":
					t.Fatalf("%q: notice without an Event", body)
				case reported[n.Event]:
					t.Fatalf("%q: %q reported twice in one document", body, n.Event)
				case !names(doc, n.Event, vm):
					t.Fatalf("%q: notice for %q, which does not name %s", body, n.Event, vm)
				case len(n.Raw) > maxRaw:
					t.Fatalf("%q: Raw of %d bytes", body, len(n.Raw))
				case !n.Observed.Equal(now):
					t.Fatalf("%q: observed %v", body, n.Observed)
				}
				reported[n.Event] = true
			}
			// A Terminate of vm that can be reported is, whatever its
			// EventId's length, its NotBefore, or its id's other entries.
			for _, e := range doc.Events {
				if e.forVM(vm) && e.check() == nil && kinds[e.EventType] == termsig.Terminate && !terminated(notices, e.key()) {
					t.Fatalf("%q: the Terminate %q of %s was not reported: %v", body, clip(e.EventID), vm, notices)
				}
			}

			// The same document again: nothing new.
			again, _ := s.update(doc, vm, seen, now.Add(time.Second), discard)
			if len(again) != 0 {
				t.Fatalf("%q: the same document again gave %v", body, again)
			}

			// The events gone: one Cleared for each event reported, nothing else.
			gone, problem := s.update(document{Incarnation: doc.Incarnation + 1}, vm, seen, now, discard)
			if problem != nil {
				t.Fatalf("an empty document: %v", problem)
			}
			var cleared []string
			for _, n := range gone {
				if n.Kind != termsig.Cleared || n.Event == "" {
					t.Fatalf("%q: %v when the events left", body, n)
				}
				cleared = append(cleared, n.Event)
			}
			var want []string
			for id := range reported {
				want = append(want, id)
			}
			slices.Sort(want)
			if !slices.Equal(cleared, want) {
				t.Fatalf("%q: cleared %q, want %q", body, cleared, want)
			}
		}
	})
}

// terminated reports whether notices has a Terminate with Event id.
func terminated(notices []termsig.Notice, id string) bool {
	return slices.ContainsFunc(notices, func(n termsig.Notice) bool { return n.Kind == termsig.Terminate && n.Event == id })
}

// The seeds themselves, as a table: what each gives to each VM.
func TestDocumentSeeds(t *testing.T) {
	nb := func(s string) time.Time {
		tm, err := time.Parse(time.RFC1123, s)
		require.NoError(t, err)
		return tm.UTC()
	}
	// Each seed is read a few minutes before its events' NotBefore, as a
	// VM reads them: a NotBefore long past is no deadline.
	seen := map[int]time.Time{
		0: nb("Mon, 11 Apr 2022 22:11:58 GMT"), 1: nb("Mon, 11 Apr 2022 22:11:58 GMT"), 2: nb("Mon, 11 Apr 2022 22:11:58 GMT"),
		3: nb("Mon, 19 Sep 2016 18:14:47 GMT"), 4: nb("Tue, 05 Mar 2024 17:11:50 GMT"), 5: nb("Mon, 11 Apr 2022 22:21:58 GMT"),
	}
	for _, tc := range []struct {
		seed int
		vm   string
		want []termsig.Notice // Source, Kind, Event, Reason, Deadline
	}{
		{0, "WestNO_0", []termsig.Notice{{Kind: termsig.Maintenance, Event: "A123BC45-1234-5678-AB90-ABCDEF123456",
			Reason: "Freeze scheduled: Virtual machine is being paused because …", Deadline: nb("Mon, 11 Apr 2022 22:26:58 GMT")}}},
		{0, "westno_1", []termsig.Notice{{Kind: termsig.Maintenance, Event: "A123BC45-1234-5678-AB90-ABCDEF123456",
			Reason: "Freeze scheduled: Virtual machine is being paused because …", Deadline: nb("Mon, 11 Apr 2022 22:26:58 GMT")}}},
		{0, "WestNO_2", nil},
		{1, "WestNO_0", []termsig.Notice{{Kind: termsig.Maintenance, Event: "A123BC45-1234-5678-AB90-ABCDEF123456",
			Reason: "Freeze started: Virtual machine is being paused because …", Deadline: seen[1]}}},
		{2, "WestNO_0", nil},
		{3, "BackEnd_IN_0", []termsig.Notice{{Kind: termsig.Reboot, Event: "602d9444-d2cd-49c7-8624-8643e7171297",
			Reason: "Reboot scheduled", Deadline: nb("Mon, 19 Sep 2016 18:29:47 GMT")}}},
		{4, "myspotvm", []termsig.Notice{{Kind: termsig.Terminate, Event: "B5C3A2E1-7F0D-4A1B-9C8E-1D2F3A4B5C6D",
			Reason: "Preempt scheduled", Deadline: nb("Tue, 05 Mar 2024 17:12:20 GMT")}}},
		{5, "WestNO_0", []termsig.Notice{{Kind: termsig.Terminate, Event: "C1",
			Reason: "Redeploy scheduled: Virtual machine is being redeployed.", Deadline: nb("Mon, 11 Apr 2022 22:36:58 GMT")}}},
		{5, "FrontEnd_IN_0", []termsig.Notice{{Kind: termsig.Terminate, Event: "C2",
			Reason: "Terminate scheduled", Deadline: nb("Mon, 11 Apr 2022 22:31:58 GMT")}}},
		{5, "BackEnd_IN_0", []termsig.Notice{{Kind: termsig.Reboot, Event: "C3",
			Reason: "Reboot started: Virtual machine is going to be restarted…", Deadline: seen[5]}}},
		{5, "nobody", nil},
	} {
		doc, err := parseDocument([]byte(docSeeds[tc.seed]))
		require.NoError(t, err, "seed %d", tc.seed)
		now := seen[tc.seed]
		got, problem := newWatched().update(doc, tc.vm, map[string]string{}, now, discard)
		require.NoError(t, problem)
		for i := range got {
			assert.True(t, json.Valid([]byte(got[i].Raw)), "Raw %q", got[i].Raw)
			assert.Contains(t, docSeeds[tc.seed], strings.Split(got[i].Raw, ",")[0], "Raw is the event as sent")
			assert.Equal(t, now, got[i].Observed)
			got[i].Raw, got[i].Observed = "", time.Time{}
		}
		assert.Equal(t, tc.want, got, "seed %d for %s", tc.seed, tc.vm)
	}
}

// An answer that is JSON, but not a document, is said to be that: not
// "not JSON", and without an empty field name.
func TestParseDocumentErrors(t *testing.T) {
	const notDocument = "answer is not a scheduled-events document"
	for _, tc := range []struct {
		body, want string
	}{
		{`<html>`, "answer is not JSON: syntax error"},
		{`{"DocumentIncarnation": 1, "Events": [`, "answer is not JSON: syntax error"},
		{``, "answer is not JSON: syntax error"},
		{`{}`, notDocument},
		{`null`, notDocument},
		{`{"DocumentIncarnation": 1}`, notDocument},
		{`{"Events": []}`, notDocument},
		{`{"DocumentIncarnation": null, "Events": []}`, notDocument},
		{`[]`, notDocument},
		{`"scheduled events"`, notDocument},
		{`42`, notDocument},
		{`{"DocumentIncarnation": "1", "Events": []}`, notDocument},
		{`{"DocumentIncarnation": 1, "Events": {}}`, notDocument},
		{`{"DocumentIncarnation": 1.5, "Events": []}`, notDocument},
	} {
		_, err := parseDocument([]byte(tc.body))
		if assert.Error(t, err, tc.body) {
			assert.Contains(t, err.Error(), tc.want, tc.body)
			assert.NotContains(t, err.Error(), "  ", "%s: an empty field name", tc.body)
		}
	}
	// An event that is not an object: the document is refused whole.
	for _, body := range []string{`{"DocumentIncarnation": 1, "Events": [1]}`, `{"DocumentIncarnation": 1, "Events": [{"EventId": 5}]}`} {
		_, err := parseDocument([]byte(body))
		if assert.Error(t, err, body) {
			assert.Contains(t, err.Error(), "event 0 is not an event", body)
			assert.NotContains(t, err.Error(), "  ", "%s: an empty field name", body)
		}
	}
	// Events beyond the bound.
	_, err := parseDocument([]byte(`{"DocumentIncarnation":1,"Events":[` + strings.Repeat("{},", maxEvents) + `{}]}`))
	assert.EqualError(t, err, "answer lists 1001 events (more than 1000)")
	doc, err := parseDocument([]byte(`{"DocumentIncarnation":1,"Events":[` + strings.Repeat("{},", maxEvents-1) + `{}]}`))
	require.NoError(t, err)
	assert.Len(t, doc.Events, maxEvents)
}

// Raw is bounded; Reason clips the description.
func TestNoticeBounds(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes
	body := `{"DocumentIncarnation":1,"Events":[{"EventId":"E","EventType":"Reboot","ResourceType":"VirtualMachine","Resources":["vm"],` +
		`"EventStatus":"Scheduled","NotBefore":"","Description":"` + long + `"}]}`
	doc, err := parseDocument([]byte(body))
	require.NoError(t, err)
	got, problem := newWatched().update(doc, "vm", map[string]string{}, time.Now(), discard)
	require.NoError(t, problem)
	require.Len(t, got, 1)
	assert.LessOrEqual(t, len(got[0].Raw), maxRaw)
	assert.Greater(t, len(got[0].Raw), maxRaw-utf8.UTFMax)
	assert.True(t, utf8.ValidString(got[0].Raw), "cut at a character's start")
	assert.Equal(t, "Reboot scheduled: "+strings.Repeat("é", 40)+"…", got[0].Reason)
	assert.True(t, got[0].Deadline.IsZero(), "a Scheduled event without NotBefore has no deadline")
}
