package azure_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// Ready is closed after the first answer, with what it called for on C by
// then; not before.
func TestReadyAfterFirstAnswer(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) {
		// The first document is held until the test lets it go.
		s.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Hang: true, Count: 1})
		s.SetEvents(
			azuretest.Event{EventID: "a", EventType: "Preempt", NotBefore: notBefore},
			azuretest.Event{EventID: "b", EventType: "Freeze", NotBefore: notBefore},
		)
	}})
	inFlight(t, h.srv, 1)
	assert.False(t, isClosed(h.n.Ready()), "ready before the first answer")
	h.srv.ClearFaults()
	awaitReady(t, h.n)
	require.Len(t, h.n.C(), 2, "the first answer's notices are on C by Ready")
	assert.Equal(t, []string{"terminate a", "maintenance b"}, events([]termsig.Notice{h.receive(), h.receive()}))
	st := h.status()
	assert.NoError(t, st.Err)
	assert.False(t, st.LastHeard.IsZero(), "the answer counts as hearing from the service")
}

// New does not wait for the network; Ready is closed after the first
// failure, which shows in Status by then.
func TestReadyAfterFirstFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(*azuretest.Server)
		want    string
	}{
		{"document 503", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Status: http.StatusServiceUnavailable})
		}, "azure: scheduled events: HTTP 503: Service Unavailable"},
		{"document hung", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Hang: true})
		}, "azure: scheduled events: no answer within 200ms: context deadline exceeded"},
		{"name 503", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Status: http.StatusServiceUnavailable})
		}, "azure: VM name: HTTP 503: Service Unavailable"},
		{"unreachable", func(s *azuretest.Server) { s.Stop() }, "azure: VM name: unreachable: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := quick()
			cfg.FirstRequestTimeout = 200 * time.Millisecond
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				srv := azuretest.NewServer()
				defer srv.Close()
				tc.prepare(srv)
				cfg.Endpoint = srv.URL
				begin := time.Now()
				n := termsig.Config{Logger: testlog.New().Logger()}.New(azure.New(cfg))
				took := time.Since(begin)
				defer n.Stop()
				awaitReady(t, n)
				st := n.Status()[0]
				assert.Equal(t, termsig.StateRunning, st.State)
				assert.EqualError(t, st.Err, tc.want)
				assert.Empty(t, n.C())
				return took
			})
		})
	}
}

// While the service enables itself, Ready waits for it (up to
// FirstRequestTimeout), and New does not.
func TestReadyWaitsForTheEnabling(t *testing.T) {
	cfg := quick()
	cfg.FirstRequestTimeout = 5 * time.Second
	h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) { s.SetEnableDelay(time.Hour) }})
	inFlight(t, h.srv, 1)
	assert.False(t, isClosed(h.n.Ready()))
	h.srv.SetEnableDelay(0)
	awaitReady(t, h.n)
	assert.NoError(t, h.status().Err)
}
