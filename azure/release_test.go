package azure_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/internal/httpguard"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// spot is a preemption 30 s ahead, as Azure gives a spot VM.
func spot(id string) azuretest.Event {
	return azuretest.Event{EventID: id, EventType: "Preempt", NotBefore: time.Now().Add(30 * time.Second)}
}

// scheduled sets a preemption and returns its notice.
func (h *harness) scheduled(id string) termsig.Notice {
	h.t.Helper()
	h.srv.SetEvents(spot(id))
	nt := h.receive()
	require.Equal(h.t, id, nt.Event)
	return nt
}

// An EventId too long for a notice's Event is acknowledged by the EventId
// itself, and its start is the same event.
func TestReleaseOfLongEventIDAcknowledgesTheEventID(t *testing.T) {
	h := start(t, options{})
	long := strings.Repeat("e", 300)
	h.srv.SetEvents(spot(long))
	nt := h.receive()
	require.Equal(t, termsig.Terminate, nt.Kind)
	require.NotEqual(t, long, nt.Event)
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.n.Release(ctx, nt))
	acks, err := h.srv.WaitStartRequests(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{long}, acks)
	started := h.receive()
	assert.Equal(t, nt.Event, started.Event)
	assert.Equal(t, "Preempt started", started.Reason)
}

// Notifier.Release acknowledges the event: the fake gets
// {"StartRequests":[{"EventId":...}]} and starts the event, which is a
// second notice. Releasing again, either notice, sends nothing more.
func TestRelease(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("spot-1")
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.n.Release(ctx, nt))
	acks, err := h.srv.WaitStartRequests(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"spot-1"}, acks)

	started := h.receive()
	assert.Equal(t, "spot-1", started.Event)
	assert.Equal(t, "Preempt started", started.Reason)

	require.NoError(t, h.n.Release(ctx, nt))
	require.NoError(t, h.n.Release(ctx, started))
	require.NoError(t, h.src.Release(ctx, nt))
	h.polls(azuretest.PathScheduledEvents, 2)
	assert.Equal(t, []string{"spot-1"}, h.srv.StartRequests(), "a second acknowledgement")
	assert.Equal(t, 1, h.srv.Requests("POST"))
	assert.Empty(t, events(h.stopAndDrain()))
}

// Release of what the source holds nothing for does nothing: a Cleared
// notice, an event no longer in the document, an event never seen.
func TestReleaseOfNothing(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("gone")
	h.srv.SetEvents()
	cleared := h.receive()
	require.Equal(t, termsig.Cleared, cleared.Kind)
	ctx, cancel := background()
	defer cancel()
	for name, n := range map[string]termsig.Notice{
		"Cleared notice":     cleared,
		"event now gone":     nt,
		"event never seen":   {Source: "azure", Kind: termsig.Terminate, Event: "never"},
		"notice without one": {Source: "azure", Kind: termsig.Terminate},
	} {
		assert.NoError(t, h.n.Release(ctx, n), name)
	}
	h.polls(azuretest.PathScheduledEvents, 2)
	assert.Zero(t, h.srv.Requests("POST"))
	assert.Empty(t, h.srv.StartRequests())
}

// A Cleared notice whose event is back in the document (a Cleared notice
// is never an acknowledgement).
func TestReleaseOfClearedWhileScheduled(t *testing.T) {
	h := start(t, options{})
	h.scheduled("e")
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.src.Release(ctx, termsig.Notice{Source: "azure", Kind: termsig.Cleared, Event: "e"}))
	assert.Zero(t, h.srv.Requests("POST"))
}

// Another source's notice is not this source's to acknowledge.
func TestReleaseOfAnotherSourcesNotice(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("e")
	ctx, cancel := background()
	defer cancel()
	other := nt
	other.Source = "imds"
	err := h.src.Release(ctx, other)
	assert.EqualError(t, err, `azure: release of a notice of source "imds"`)
	assert.ErrorIs(t, h.n.Release(ctx, other), termsig.ErrUnknownSource)
	assert.Zero(t, h.srv.Requests("POST"))
}

// A Source that has never watched holds nothing.
func TestReleaseBeforeWatch(t *testing.T) {
	srv := azuretest.NewServer()
	defer srv.Close()
	src := azure.New(fast(srv))
	ctx, cancel := background()
	defer cancel()
	assert.NoError(t, src.Release(ctx, termsig.Notice{Source: "azure", Kind: termsig.Terminate, Event: "e"}))
	assert.Zero(t, srv.Requests(""))
}

// The acknowledgement is retried through failures until it is taken.
func TestReleaseRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault termsigtest.Fault
	}{
		{"503 burst", termsigtest.Fault{Key: "POST", Count: 5, Status: http.StatusServiceUnavailable}},
		{"429 burst", termsigtest.Fault{Key: "POST", Count: 5, Status: http.StatusTooManyRequests}},
		{"dropped", termsigtest.Fault{Key: "POST", Count: 5, Drop: true}},
		{"hung", termsigtest.Fault{Key: "POST", Count: 2, Hang: true}},
		{"400", termsigtest.Fault{Key: "POST", Count: 2, Status: http.StatusBadRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := quick()
			cfg.RequestTimeout = 100 * time.Millisecond
			h := start(t, options{cfg: &cfg})
			nt := h.scheduled("e")
			h.srv.Inject(tc.fault)
			ctx, cancel := background()
			defer cancel()
			require.NoError(t, h.n.Release(ctx, nt))
			assert.Equal(t, []string{"e"}, h.srv.StartRequests())
			if !tc.fault.Hang {
				// Counted when its handler returns, which can be after
				// the client has the answer.
				await(t, h.srv, "the acknowledgements counted", func() bool { return h.srv.Requests("POST") >= tc.fault.Count+1 })
				assert.Equal(t, tc.fault.Count+1, h.srv.Requests("POST"))
			}
			// A hung acknowledgement is not counted: the fake does not let
			// go of it when its client gives up (see azuretest's
			// TestHangEndsWhenTheClientGivesUp), but only when it closes.
			started := h.receive()
			assert.Equal(t, "Preempt started", started.Reason)
		})
	}
}

// Release gives up when its context ends, at once, with an error that
// says so, whatever the server does meanwhile.
func TestReleaseGivesUpWithItsContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   func(*azure.Config)
		fault termsigtest.Fault
		want  error
	}{
		{"hung", func(c *azure.Config) { c.RequestTimeout = time.Hour }, termsigtest.Fault{Key: "POST", Hang: true}, nil},
		{"503", func(c *azure.Config) { c.MaxBackoff = time.Hour }, termsigtest.Fault{Key: "POST", Status: http.StatusServiceUnavailable}, nil},
		{"slow", func(c *azure.Config) { c.RequestTimeout = time.Hour }, termsigtest.Fault{Key: "POST", Delay: time.Hour}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := quick()
			tc.cfg(&cfg)
			h := start(t, options{cfg: &cfg})
			nt := h.scheduled("e")
			h.srv.Inject(tc.fault)
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				const limit = 50 * time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				defer cancel()
				begin := time.Now()
				err := h.n.Release(ctx, nt)
				late := time.Since(begin) - limit
				require.Error(t, err)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Contains(t, err.Error(), "azure: acknowledge event e")
				return late
			})
			assert.Empty(t, h.srv.StartRequests())
		})
	}
	t.Run("already done", func(t *testing.T) {
		h := start(t, options{})
		nt := h.scheduled("e")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := h.n.Release(ctx, nt)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, h.srv.StartRequests())
	})
}

// Stop acknowledges nothing.
func TestStopAcknowledgesNothing(t *testing.T) {
	h := start(t, options{})
	h.scheduled("e")
	h.n.Stop()
	assert.Zero(t, h.srv.Requests("POST"))
	assert.Empty(t, h.srv.StartRequests())
	assert.NotEqual(t, "Started", h.srv.Events()[0].EventStatus)
}

// Release may be called after Stop: the source still knows the events it
// last saw.
func TestReleaseAfterStop(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("e")
	h.n.Stop()
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.n.Release(ctx, nt))
	assert.Equal(t, []string{"e"}, h.srv.StartRequests())
}

// With StartOnAck off (Azure has yet to act), the acknowledgement is
// recorded and nothing else happens: no second notice, and no second
// acknowledgement.
func TestReleaseNotYetActedOn(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.n.Release(ctx, nt))
	require.NoError(t, h.n.Release(ctx, nt))
	h.polls(azuretest.PathScheduledEvents, 3)
	assert.Equal(t, []string{"e"}, h.srv.StartRequests())
	assert.Empty(t, events(h.stopAndDrain()))
}

// An event acknowledged, gone, then scheduled again under the same id is
// a new event: it can be acknowledged again.
func TestReleaseOfAnEventBackAgain(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.n.Release(ctx, nt))
	h.srv.SetEvents()
	assert.Equal(t, termsig.Cleared, h.receive().Kind)
	again := h.scheduled("e")
	require.NoError(t, h.n.Release(ctx, again))
	assert.Equal(t, []string{"e", "e"}, h.srv.StartRequests())
}

// The caller's HTTP client makes the acknowledgement too.
func TestReleaseWithCallersClient(t *testing.T) {
	ct := newCountingTransport(t)
	cfg := quick()
	cfg.HTTPClient = &http.Client{Transport: ct}
	h := start(t, options{cfg: &cfg})
	nt := h.scheduled("e")
	ctx, cancel := background()
	defer cancel()
	require.NoError(t, h.n.Release(ctx, nt))
	assert.Contains(t, ct.requests(), "POST "+azuretest.PathScheduledEvents)
}

// An endpoint written with a trailing slash, which Config accepts ("no
// path"), is the same endpoint for the acknowledgement as for the polls.
func TestReleaseEndpointWithTrailingSlash(t *testing.T) {
	h := start(t, options{endpoint: func(s *azuretest.Server) string { return s.URL + "/" }})
	nt := h.scheduled("e")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	assert.NoError(t, h.n.Release(ctx, nt), "acknowledgement to the endpoint with a trailing slash")
	assert.Equal(t, []string{"e"}, h.srv.StartRequests())
}

// A redirect of the acknowledgement is refused, never followed: the host
// it names does not get it. The polls go through to the fake; the
// acknowledgement is redirected.
func TestReleaseRedirectRefused(t *testing.T) {
	other := azuretest.NewServer()
	defer other.Close()
	h := start(t, options{endpoint: func(s *azuretest.Server) string {
		return redirectPosts(t, s, other.URL).URL
	}})
	nt := h.scheduled("e")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := h.n.Release(ctx, nt)
	require.Error(t, err)
	assert.ErrorIs(t, err, httpguard.ErrRedirect)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "redirect refused (HTTP 307)")
	assert.Empty(t, h.srv.StartRequests())
	assert.Zero(t, other.Requests(""), "the redirect was followed")
}

// redirectPosts returns a server in front of srv: it passes GET requests
// to srv and redirects the others to the same path on to.
func redirectPosts(t *testing.T, srv *azuretest.Server, to string) *httptest.Server {
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	tr := &http.Transport{}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) }, // no X-Forwarded-For, which IMDS refuses
		Transport: tr,
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		front.Close()
		tr.CloseIdleConnections()
	})
	return front
}

// An event that leaves the document while its acknowledgement is being
// retried is "no longer scheduled": Release stops rather than retry until
// its context ends.
func TestReleaseStopsWhenEventLeaves(t *testing.T) {
	h := start(t, options{})
	nt := h.scheduled("e")
	h.srv.Inject(termsigtest.Fault{Key: "POST", Status: 500})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.src.Release(ctx, nt) }()
	h.srv.SetEvents()
	require.Equal(t, termsig.Cleared, h.receive().Kind)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(time.Second):
		t.Error("Release still retrying an event that left the document a second ago")
		<-done
	}
}

// An acknowledgement in flight while its event leaves and comes back (same
// EventId) does not mark the new stay acknowledged: its Release sends one.
func TestReturnedEventIsAcknowledgedAnew(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	h.srv.Inject(termsigtest.Fault{Key: "POST", Count: 1, Delay: 500 * time.Millisecond})
	ctx, cancel := background()
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.src.Release(ctx, nt) }()
	inFlight(t, h.srv, 1)
	h.srv.SetEvents()
	require.Equal(t, termsig.Cleared, h.receive().Kind)
	again := h.scheduled("e")
	require.NoError(t, <-done)
	require.NoError(t, h.src.Release(ctx, again))
	assert.Equal(t, []string{"e", "e"}, h.srv.StartRequests(), "the event back again was never acknowledged")
}

// Two concurrent Releases of one notice send one acknowledgement.
func TestConcurrentReleaseAcksOnce(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	h.srv.Inject(termsigtest.Fault{Key: "POST", Delay: 200 * time.Millisecond})
	ctx, cancel := background()
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, h.src.Release(ctx, nt)) }()
	}
	wg.Wait()
	assert.Equal(t, []string{"e"}, h.srv.StartRequests())
}

// Azure starts an acknowledged event for every resource it lists, so
// Release refuses an event that names another VM too (ErrShared).
func TestReleaseRefusesSharedEvent(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	h.srv.SetEvents(azuretest.Event{EventID: "e", EventType: "Reboot", Resources: []string{"test-vm", "other-vm"}, NotBefore: notBefore})
	nt := h.receive()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.src.Release(ctx, nt)
	assert.ErrorIs(t, err, azure.ErrShared)
	assert.Empty(t, h.srv.StartRequests(), "acknowledged an event that also holds other-vm")
}

// After a restart of Watch (same Source, new Notifier), a notice of the
// first run whose event is still scheduled is acknowledged at once, not
// taken for gone until the new run has read a document.
func TestReleaseAcknowledgesAcrossRestart(t *testing.T) {
	h := start(t, options{prepare: func(s *azuretest.Server) { s.SetStartOnAck(false) }})
	nt := h.scheduled("e")
	h.stopAndDrain()
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Hang: true})
	n2 := termsig.Config{}.New(h.src)
	defer n2.Stop()
	inFlight(t, h.srv, 1) // the new run is polling, has seen no document
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.src.Release(ctx, nt)
	assert.False(t, err == nil && len(h.srv.StartRequests()) == 0, "Release returned nil without acknowledging a scheduled event")
	h.srv.ClearFaults()
}
