package azure_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/httpguard/guardtest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// Stop returns within 100 ms whatever the source is doing: every wait is
// a timer or a request that ends with the Watch context.
func TestStopIsPrompt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     azure.Config
		buffer  int
		prepare func(*azuretest.Server)
		busy    func(*testing.T, *harness) // returns once the source is in that state
	}{
		{
			name: "idle between polls",
			cfg:  azure.Config{Interval: time.Hour},
			busy: func(t *testing.T, h *harness) { awaitReady(t, h.n) },
		},
		{
			name: "at the default interval",
			cfg:  azure.Config{},
			busy: func(t *testing.T, h *harness) { awaitReady(t, h.n) },
		},
		{
			name:    "document request hanging",
			cfg:     azure.Config{RequestTimeout: time.Hour, FirstRequestTimeout: time.Hour},
			prepare: func(s *azuretest.Server) { s.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Hang: true}) },
			busy:    func(t *testing.T, h *harness) { inFlight(t, h.srv, 1) },
		},
		{
			name:    "name request hanging",
			cfg:     azure.Config{RequestTimeout: time.Hour, FirstRequestTimeout: time.Hour},
			prepare: func(s *azuretest.Server) { s.Inject(termsigtest.Fault{Hang: true}) },
			busy:    func(t *testing.T, h *harness) { inFlight(t, h.srv, 1) },
		},
		{
			name: "a body that never ends",
			cfg:  azure.Config{RequestTimeout: time.Hour, FirstRequestTimeout: time.Hour, Interval: time.Hour},
			prepare: func(s *azuretest.Server) {
				s.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, BodySize: termsigtest.EndlessBody})
			},
			busy: func(t *testing.T, h *harness) { inFlight(t, h.srv, 1) },
		},
		{
			name:    "backing off",
			cfg:     azure.Config{Interval: azure.FloorInterval, MaxBackoff: time.Hour},
			prepare: func(s *azuretest.Server) { s.Inject(termsigtest.Fault{Status: http.StatusServiceUnavailable}) },
			// After 6 failures the next wait is 160 ms to 320 ms.
			busy: func(t *testing.T, h *harness) { h.polls(azuretest.PathVMName, 6) },
		},
		{
			name:    "the service enabling itself",
			cfg:     azure.Config{RequestTimeout: time.Hour, FirstRequestTimeout: time.Hour},
			prepare: func(s *azuretest.Server) { s.SetEnableDelay(time.Hour) },
			busy:    func(t *testing.T, h *harness) { inFlight(t, h.srv, 1) },
		},
		{
			name:   "a notice nobody reads",
			cfg:    azure.Config{Interval: azure.FloorInterval},
			buffer: 1,
			prepare: func(s *azuretest.Server) {
				s.SetEvents(
					azuretest.Event{EventID: "a", EventType: "Preempt", NotBefore: notBefore},
					azuretest.Event{EventID: "b", EventType: "Reboot", NotBefore: notBefore},
				)
			},
			// The first notice fills C; the second waits for a reader.
			busy: func(t *testing.T, h *harness) { h.logs.WaitFor(t, "termsig: notice", 1) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				cfg := tc.cfg
				h := start(t, options{cfg: &cfg, prepare: tc.prepare, buffer: tc.buffer})
				tc.busy(t, h)
				begin := time.Now()
				h.n.Stop()
				return time.Since(begin)
			})
		})
	}
}

// A notice nobody took by Stop is not sent after: C holds what fit.
func TestStopWithNoticeUnread(t *testing.T) {
	h := start(t, options{buffer: 1, prepare: func(s *azuretest.Server) {
		s.SetEvents(
			azuretest.Event{EventID: "a", EventType: "Preempt", NotBefore: notBefore},
			azuretest.Event{EventID: "b", EventType: "Reboot", NotBefore: notBefore},
			azuretest.Event{EventID: "c", EventType: "Freeze", NotBefore: notBefore},
		)
	}})
	h.logs.WaitFor(t, "termsig: notice", 1)
	assert.Equal(t, []string{"terminate a"}, events(h.stopAndDrain()))
	assert.Equal(t, termsig.StateStopped, h.status().State)
}

// With a DNS server that never answers, Stop returns at once and leaves no
// lookup behind: Go's resolver would otherwise wait seconds.
func TestStopEndsDNSLookups(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		dial, queried := guardtest.SilentDNS(t, wait)
		cfg := azure.WithDNSDial(azure.Config{Endpoint: "http://metadata.termsig.test", Logger: slog.New(slog.DiscardHandler)}, dial)
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(azure.New(cfg))
		defer n.Stop()
		queried()
		begin := time.Now()
		n.Stop()
		return time.Since(begin)
	})
}
