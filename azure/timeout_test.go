package azure_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

// The first call of the scheduled events on a VM enables the service and
// can take minutes: the first request waits up to FirstRequestTimeout,
// and succeeds; once the service has answered, requests wait
// RequestTimeout only.
func TestFirstRequestWaitsForTheService(t *testing.T) {
	const enabling = 300 * time.Millisecond
	cfg := azure.Config{
		Interval:            100 * time.Millisecond, // few polls: a loaded machine has few chances to miss 50 ms
		RequestTimeout:      50 * time.Millisecond,
		FirstRequestTimeout: 5 * time.Second,
		MaxBackoff:          100 * time.Millisecond,
	}
	began := time.Now()
	h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) {
		s.SetEnableDelay(enabling)
		s.SetEvents(pending)
	}})
	nt := h.receive()
	assert.Equal(t, "pending", nt.Event)
	assert.GreaterOrEqual(t, time.Since(began), enabling, "the first answer came before the service was enabled")
	awaitReady(t, h.n)
	assert.NoError(t, h.status().Err, "the first request waited for the service")
	assert.Zero(t, h.logs.Count(failing), "the first request failed")
	// Given up at RequestTimeout, the first request would have been made
	// again and again while the service enabled itself.
	await(t, h.srv, "the first request counted", func() bool { return h.srv.Requests(azuretest.PathScheduledEvents) >= 1 })
	assert.LessOrEqual(t, h.srv.Requests(azuretest.PathScheduledEvents), 2, "the first request was given up and made again")

	// From now on a request later than RequestTimeout is an error.
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Delay: time.Second})
	assert.Equal(t, "azure: scheduled events: no answer within 50ms: context deadline exceeded", h.failure())
	h.srv.ClearFaults()
	h.recovers()
}

// FirstRequestTimeout, not RequestTimeout, bounds the requests until the
// service has answered: an enabling that takes longer is an error naming
// it, retried until the service answers.
func TestFirstRequestTimeoutBoundsTheFirstRequests(t *testing.T) {
	cfg := quick()
	cfg.RequestTimeout, cfg.FirstRequestTimeout = 5*time.Second, 100*time.Millisecond
	h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) {
		s.SetEnableDelay(time.Hour)
		s.SetEvents(pending)
	}})
	assert.Equal(t, "azure: scheduled events: no answer within 100ms: context deadline exceeded", h.failure())
	awaitReady(t, h.n) // a first failure is a first look
	h.polls(azuretest.PathScheduledEvents, 2)
	h.quiet()
	h.srv.SetEnableDelay(0) // the enabling ends
	assert.Equal(t, "pending", h.receive().Event)
	h.recovers()
}

// The VM's name is not subject to the enabling: its request waits
// RequestTimeout.
func TestVMNameRequestUsesRequestTimeout(t *testing.T) {
	cfg := quick()
	cfg.RequestTimeout, cfg.FirstRequestTimeout = 100*time.Millisecond, time.Hour
	h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) {
		s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Hang: true})
	}})
	assert.Equal(t, "azure: VM name: no answer within 100ms: context deadline exceeded", h.failure())
}
