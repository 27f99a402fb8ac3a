package azure_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

// An answer that cannot be an Azure VM's name (by Azure's naming rules)
// is refused like a failed request: it shows in Status, and the name is
// asked for again.
func TestVMNameMustBeAnAzureName(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"an error page", "<html><body>Access denied</body></html>"},
		{"a status line", "Service Unavailable"},
		{"JSON", `{"error":"Not found"}`},
		{"too long", strings.Repeat("v", 65)},
		{"ends with a hyphen", "vm-"},
		{"ends with a period", "vm."},
		{"starts with an underscore", "_vm"},
		{"a slash", "rg/vm"},
		{"two lines", "vm\nvm"},
		{"not UTF-8", "vm\xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{prepare: func(s *azuretest.Server) {
				s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Count: 1, Body: tc.body})
				s.SetEvents(pending)
			}})
			assert.Contains(t, h.failure(), "azure: VM name: the answer is not an Azure VM name")
			assert.Equal(t, "pending", h.receive().Event, "the name asked for again")
			h.recovers()
		})
	}
}

// Names Azure gives: a VM's, a scale set instance's (Uniform and
// Flexible), a cloud service role instance's, 64 characters.
func TestVMNamesAzureGivesAreTaken(t *testing.T) {
	for _, name := range []string{"myVM", "WestNO_0", "myScaleSet_12", "myvmss_1a2b3c4d", "FrontEnd_IN_0", "web.01", "9", strings.Repeat("v", 64)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{prepare: func(s *azuretest.Server) { s.SetVMName(name) }})
			h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Preempt", NotBefore: notBefore})
			assert.Equal(t, "e", h.receive().Event)
			assert.NoError(t, h.status().Err)
		})
	}
}

// One wrong answer to the name (a proxy's page that looks like a name)
// does not make the source deaf: a document with events, none of them
// for that name, makes it ask again, and this VM's event is reported.
func TestWrongVMNameIsReadAgainWhenEventsNameOthers(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) {
		s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Count: 1, Body: "Forbidden"})
	}})
	h.polls(azuretest.PathScheduledEvents, 2)
	h.srv.SetEvents(azuretest.Event{EventID: "spot", EventType: "Preempt", NotBefore: notBefore})
	nt := h.receive()
	assert.Equal(t, "spot", nt.Event)
	assert.Equal(t, termsig.Terminate, nt.Kind)
	assert.Equal(t, 2, h.srv.Requests(azuretest.PathVMName))
	assert.NoError(t, h.status().Err)
	assert.Zero(t, h.logs.Count(failing), "the name was put right before the document was looked at")
}

// While no event has named it, the name is read again every so often, so
// that a wrong answer does not last until the first event.
func TestUnconfirmedVMNameIsReadAgainPeriodically(t *testing.T) {
	cfg := azure.WithNameInterval(quick(), 20*time.Millisecond)
	h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) {
		s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Count: 1, Body: "Forbidden"})
	}})
	h.polls(azuretest.PathVMName, 3)
	assert.NoError(t, h.status().Err, "no events: nothing wrong to see")
}

// A name that an event has named is right (a VM's name does not change):
// it is not read again.
func TestConfirmedVMNameIsNotReadAgain(t *testing.T) {
	cfg := azure.WithNameInterval(quick(), 20*time.Millisecond)
	h := start(t, options{cfg: &cfg})
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Reboot", NotBefore: notBefore})
	assert.Equal(t, "e", h.receive().Event)
	n := h.srv.Requests(azuretest.PathVMName)
	h.srv.SetEvents(azuretest.Event{EventID: "other", EventType: "Reboot", Resources: []string{"other-vm"}, NotBefore: notBefore})
	assert.Equal(t, termsig.Cleared, h.receive().Kind)
	h.polls(azuretest.PathScheduledEvents, 10) // ≥ 100 ms: five NameIntervals
	assert.Equal(t, n, h.srv.Requests(azuretest.PathVMName))
	assert.NoError(t, h.status().Err, "another VM's events, once this VM's name is confirmed")
}

// A name read again that fails to come keeps the name the source has:
// it goes on polling with it, and Status shows the failure.
func TestVMNameReadAgainFailingKeepsTheName(t *testing.T) {
	cfg := azure.WithNameInterval(quick(), 20*time.Millisecond)
	h := start(t, options{cfg: &cfg})
	h.polls(azuretest.PathVMName, 1)
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Status: http.StatusServiceUnavailable})
	assert.Equal(t, "azure: VM name: HTTP 503: Service Unavailable", h.failure())
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Preempt", NotBefore: notBefore})
	assert.Equal(t, "e", h.receive().Event)
	h.srv.ClearFaults()
	h.recovered()
}

// A document with events, none of them for this VM, shows in Status while
// the name has not been confirmed by an event: the name may be wrong (here
// Config.VMName, which is never read again), or the events are the other
// VMs' of an availability set. It is healthy again once they leave.
func TestStatusSaysWhenNoEventNamesThisVM(t *testing.T) {
	cfg := quick()
	cfg.VMName = "typo-vm"
	h := start(t, options{cfg: &cfg})
	h.polls(azuretest.PathScheduledEvents, 2)
	h.srv.SetEvents(azuretest.Event{EventID: "spot", EventType: "Preempt", NotBefore: notBefore},
		azuretest.Event{EventID: "f", EventType: "Freeze", Resources: []string{"vm-2", "vm-3"}, NotBefore: notBefore})
	want := `azure: 2 scheduled events, none for this VM "typo-vm" (they name test-vm, vm-2, vm-3): another VM's, or a wrong VM name`
	assert.Equal(t, want, h.failure())
	require.Error(t, h.status().Err)
	assert.Equal(t, want, h.status().Err.Error())
	assert.Equal(t, termsig.StateRunning, h.status().State)
	h.polls(azuretest.PathScheduledEvents, 3)
	h.quiet()
	assert.Equal(t, 1, h.logs.Count(failing), "one change, not one per poll")
	h.srv.SetEvents()
	h.recovered()
	assert.Zero(t, h.srv.Requests(azuretest.PathVMName), "Config.VMName is not read")
}
