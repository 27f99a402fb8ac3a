package fake

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/termsig/termsig/azure/azuretest"
)

// The event types of Scheduled Events, and the least notice Azure gives
// each, which is the NotBefore of the fake's event unless --notice says
// otherwise ("Azure Metadata Service: Scheduled Events", Event
// scheduling: Freeze and Reboot 15 minutes, Redeploy 10, Preempt 30
// seconds, Terminate configurable from 5 to 15 minutes, 5 by default).
var azureNotice = map[string]time.Duration{
	"Preempt":   30 * time.Second,
	"Reboot":    15 * time.Minute,
	"Redeploy":  10 * time.Minute,
	"Freeze":    15 * time.Minute,
	"Terminate": 5 * time.Minute,
}

var azureTypes = []string{"Preempt", "Reboot", "Redeploy", "Freeze", "Terminate"}

// What a real VM goes through when its event starts.
var azureDone = map[string]string{
	"Preempt":   "evicted",
	"Reboot":    "rebooted",
	"Redeploy":  "moved to another host",
	"Freeze":    "paused",
	"Terminate": "deleted",
}

// defaultVM is the VM name that termsig fake azure answers by default.
const defaultVM = "termsig-vm"

var azureKind = kind{
	name:     "azure",
	listen:   "127.0.0.1:1340",
	env:      "AZURE_METADATA_ENDPOINT",
	usage:    usageAzure,
	envValue: func(base string) string { return base },
	flags: func(fs *flag.FlagSet) func(map[string]bool) (script, error) {
		sc := &azureScript{vm: defaultVM, typ: choice{v: "Preempt", words: azureTypes}}
		fs.StringVar(&sc.vm, "vm", defaultVM, "")
		fs.Var(&sc.eventIn, "event-in", "")
		fs.Var(&sc.typ, "type", "")
		fs.Var(&sc.notice, "notice", "")
		return func(set map[string]bool) (script, error) {
			if err := needs(set, "event-in", "type", "notice"); err != nil {
				return nil, err
			}
			if err := checkVMName(sc.vm); err != nil {
				return nil, fmt.Errorf("--vm %q: %w", sc.vm, err)
			}
			sc.event = set["event-in"]
			if !set["notice"] {
				sc.notice.d = azureNotice[sc.typ.v]
			}
			return sc, nil
		}
	},
}

// checkVMName refuses a name that Azure does not give a VM, since the azure
// source refuses it too and would never see the event: at most 64 letters,
// digits, '-', '_' and '.', not starting with '_', not ending with '.' or
// '-'.
func checkVMName(name string) error {
	switch {
	case name == "":
		return errors.New("a VM has a name: give one, or leave --vm out for " + defaultVM)
	case !utf8.ValidString(name) || utf8.RuneCountInString(name) > 64 ||
		name[0] == '_' || strings.HasSuffix(name, ".") || strings.HasSuffix(name, "-") ||
		strings.ContainsFunc(name, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' && r != '.'
		}):
		return errors.New("not a name Azure gives a VM (at most 64 letters, digits, '-', '_' and '.'; not starting with '_', not ending with '.' or '-')")
	}
	return nil
}

// azureScript is the flags of termsig fake azure.
type azureScript struct {
	vm      string
	event   bool // --event-in given
	eventIn duration
	typ     choice
	notice  duration
}

// eventID returns a new EventId, a random UUID as Azure's are.
func eventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (sc *azureScript) start(t0 time.Time) *running {
	srv := azuretest.NewServer()
	srv.SetVMName(sc.vm)
	a := &azureEvents{srv: srv}
	r := &running{handler: srv, close: srv.Close, watch: a.watch}
	if !sc.event {
		r.plan = planLine(nil) + fmt.Sprintf(" for VM %s", sc.vm)
		return r
	}
	appear := t0.Add(sc.eventIn.d)
	// NotBefore is whole seconds (RFC 1123): truncated, so that it is
	// never later than --notice says.
	notBefore := appear.Add(sc.notice.d).Truncate(time.Second)
	source := "Platform"
	if sc.typ.v == "Terminate" {
		source = "User" // a scale set's scale-in, or a deletion
	}
	a.ev = azuretest.Event{
		EventID:     eventID(),
		EventType:   sc.typ.v,
		Resources:   []string{sc.vm},
		NotBefore:   notBefore,
		Description: "termsig fake: a scripted " + sc.typ.v,
		EventSource: source,
	}
	r.plan = fmt.Sprintf("scheduled: a %s of VM %s (EventId %s) at %s, NotBefore %s",
		sc.typ.v, sc.vm, a.ev.EventID, rfc3339(appear), notBefore.UTC().Format(http.TimeFormat))
	r.steps = []step{{appear, a.appear}, {notBefore, a.due}}
	return r
}

// azureEvents is the event of termsig fake azure as it goes: scheduled,
// then started by an acknowledgement or by its NotBefore.
type azureEvents struct {
	srv *azuretest.Server
	ev  azuretest.Event // as scheduled

	mu       sync.Mutex
	appeared bool
	started  bool
}

func (a *azureEvents) appear() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.srv.SetEvents(a.ev)
	a.appeared = true
	return fmt.Sprintf("scheduled event %s: %s of %s, NotBefore %s, EventStatus Scheduled (DocumentIncarnation %d)",
		a.ev.EventID, a.ev.EventType, a.ev.Resources[0], a.ev.NotBefore.UTC().Format(http.TimeFormat), a.srv.Incarnation())
}

// due starts the event at its NotBefore, as Azure does, unless an
// acknowledgement has started it.
func (a *azureEvents) due() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return ""
	}
	ev := a.ev
	ev.EventStatus, ev.NotBefore = "Started", time.Time{}
	a.srv.SetEvents(ev)
	a.started = true
	return a.startedLine("NotBefore has passed")
}

// startedLine says that the event has started, and why. a.mu must be held.
func (a *azureEvents) startedLine(why string) string {
	return fmt.Sprintf("event %s started (%s): EventStatus Started, NotBefore empty (DocumentIncarnation %d); a real VM would be %s now",
		a.ev.EventID, why, a.srv.Incarnation(), azureDone[a.ev.EventType])
}

// watch reports each acknowledgement, and the start it makes, until ctx
// ends.
func (a *azureEvents) watch(ctx context.Context, emit func(string)) {
	seen := 0
	for {
		acks, err := a.srv.WaitStartRequests(ctx, seen+1)
		if err != nil {
			return
		}
		for _, id := range acks[seen:] {
			for _, line := range a.acknowledged(id) {
				emit(line)
			}
		}
		seen = len(acks)
	}
}

// acknowledged says what an acknowledgement of id did: the fake starts the
// event it names, as Azure does.
func (a *azureEvents) acknowledged(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	line := "acknowledgement: POST StartRequests names " + id
	switch {
	case !a.appeared || id != a.ev.EventID:
		return []string{line + ", no event of the document: nothing starts"}
	case a.started:
		return []string{line + ", which has started already"}
	}
	for _, e := range a.srv.Events() {
		if e.EventID == id && e.EventStatus == "Started" {
			a.started = true
			return []string{line, a.startedLine("acknowledged")}
		}
	}
	return []string{line}
}
