package azure_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/azure"
	"github.com/termsig/termsig/azure/azuretest"
	"github.com/termsig/termsig/termsigtest"
)

// pending is the event the fake lists while a fault hides its document:
// once the fault is gone, it is the first notice.
var pending = azuretest.Event{EventID: "pending", EventType: "Preempt", NotBefore: notBefore}

// Whatever stands in the way of the document is an error in Status, in a
// few stable words, never a notice; the source keeps polling, and reports
// the events once the fault is gone.
func TestFaults(t *testing.T) {
	slow := quick()
	slow.RequestTimeout, slow.FirstRequestTimeout = 100*time.Millisecond, 100*time.Millisecond
	notDocument := "azure: scheduled events: answer is not a scheduled-events document (no DocumentIncarnation or Events)"
	for _, tc := range []struct {
		name  string
		cfg   *azure.Config
		fault termsigtest.Fault
		want  string // the whole error
	}{
		{"400", nil, termsigtest.Fault{Status: http.StatusBadRequest, Body: `{"error":"Bad request. Required metadata header not specified"}`},
			`azure: scheduled events: HTTP 400: {"error":"Bad request. Required metadata header not specified"}`},
		{"404", nil, termsigtest.Fault{Status: http.StatusNotFound}, "azure: scheduled events: HTTP 404: Not Found"},
		{"429", nil, termsigtest.Fault{Status: http.StatusTooManyRequests}, "azure: scheduled events: HTTP 429: Too Many Requests"},
		{"500", nil, termsigtest.Fault{Status: http.StatusInternalServerError}, "azure: scheduled events: HTTP 500: Internal Server Error"},
		{"503", nil, termsigtest.Fault{Status: http.StatusServiceUnavailable}, "azure: scheduled events: HTTP 503: Service Unavailable"},
		{"long error page", nil, termsigtest.Fault{Status: http.StatusBadGateway, Body: strings.Repeat("e", 500)},
			"azure: scheduled events: HTTP 502: " + strings.Repeat("e", 100) + "…"},
		{"slow", &slow, termsigtest.Fault{Delay: time.Second}, "azure: scheduled events: no answer within 100ms: context deadline exceeded"},
		{"hung", &slow, termsigtest.Fault{Hang: true}, "azure: scheduled events: no answer within 100ms: context deadline exceeded"},
		{"dropped", nil, termsigtest.Fault{Drop: true}, "azure: scheduled events: connection closed without an answer"},
		{"truncated JSON", nil, termsigtest.Fault{Body: `{"DocumentIncarnation": 5, "Events": [{"EventId": "x", "EventType": "Pre`},
			"azure: scheduled events: answer is not JSON: syntax error"},
		{"HTML 200", nil, termsigtest.Fault{Body: "<html><body>Welcome to the captive portal</body></html>"},
			"azure: scheduled events: answer is not JSON: syntax error"},
		{"empty 200", nil, termsigtest.Fault{Status: http.StatusOK}, "azure: scheduled events: answer is not JSON: syntax error"},
		{"{}", nil, termsigtest.Fault{Body: `{}`}, notDocument},
		{"Events null", nil, termsigtest.Fault{Body: `{"DocumentIncarnation": 7, "Events": null}`}, notDocument},
		{"no Events", nil, termsigtest.Fault{Body: `{"DocumentIncarnation": 7}`}, notDocument},
		{"no DocumentIncarnation", nil, termsigtest.Fault{Body: `{"Events": []}`}, notDocument},
		{"null", nil, termsigtest.Fault{Body: `null`}, notDocument},
		{"another service's JSON", nil, termsigtest.Fault{Body: `{"compute":{"name":"test-vm"}}`}, notDocument},
		{"too many events", nil, termsigtest.Fault{Body: doc(9, strings.Split(strings.Repeat("{},", 1001), ",")[:1001]...)},
			"azure: scheduled events: answer lists 1001 events (more than 1000)"},
		{"endless body", nil, termsigtest.Fault{BodySize: termsigtest.EndlessBody}, "azure: scheduled events: answer larger than 1 MiB"},
		{"100 MB body", nil, termsigtest.Fault{BodySize: 100 << 20}, "azure: scheduled events: answer larger than 1 MiB"},
		{"302 without Location", nil, termsigtest.Fault{Status: http.StatusFound}, "azure: scheduled events: redirect refused (HTTP 302)"},
		{"304", nil, termsigtest.Fault{Status: http.StatusNotModified}, "azure: scheduled events: redirect refused (HTTP 304)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, options{cfg: tc.cfg})
			h.polls(azuretest.PathScheduledEvents, 1) // the VM's name is known
			f := tc.fault
			f.Key = azuretest.PathScheduledEvents
			h.srv.Inject(f)
			h.srv.SetEvents(pending)
			assert.Equal(t, tc.want, h.failure())
			st := h.status()
			assert.Equal(t, termsig.StateRunning, st.State)
			assert.EqualError(t, st.Err, tc.want)
			h.polls(azuretest.PathScheduledEvents, 3) // retried
			h.quiet()
			assert.Equal(t, 1, h.logs.Count(failing), "one log line for the fault, not one per request")

			h.srv.ClearFaults()
			nt := h.receive()
			assert.Equal(t, "pending", nt.Event, "the event hidden by the fault")
			h.recovers()
			assert.Empty(t, events(h.stopAndDrain()))
		})
	}
}

// A burst of 503s, acknowledgements and the name included, ends by
// itself: one outage, one line each way.
func TestFaultBurst(t *testing.T) {
	h := start(t, options{})
	h.polls(azuretest.PathScheduledEvents, 1)
	h.srv.Inject(termsigtest.Fault{Count: 12, Status: http.StatusServiceUnavailable})
	h.srv.SetEvents(pending)
	assert.Equal(t, "azure: scheduled events: HTTP 503: Service Unavailable", h.failure())
	nt := h.receive() // after the 12th
	assert.Equal(t, "pending", nt.Event)
	assert.GreaterOrEqual(t, h.srv.Requests(azuretest.PathScheduledEvents), 12)
	h.recovered()
	assert.Equal(t, 1, h.logs.Count(failing))
	assert.Equal(t, 1, h.logs.Count(healthy))
	assert.NoError(t, h.status().Err)
}

// The service goes away (the network path breaks) and comes back.
func TestFaultUnreachable(t *testing.T) {
	t.Run("while watching", func(t *testing.T) {
		h := start(t, options{})
		h.polls(azuretest.PathScheduledEvents, 2)
		h.srv.Stop()
		h.srv.SetEvents(pending)
		assert.Equal(t, "azure: scheduled events: unreachable: connection refused", h.failure())
		assert.EqualError(t, h.status().Err, "azure: scheduled events: unreachable: connection refused")
		h.quiet()
		require.NoError(t, h.srv.Start())
		assert.Equal(t, "pending", h.receive().Event)
		h.recovers()
	})
	t.Run("from the start", func(t *testing.T) {
		h := start(t, options{prepare: func(s *azuretest.Server) {
			s.Stop()
			s.SetEvents(pending)
		}})
		assert.Equal(t, "azure: VM name: unreachable: connection refused", h.failure())
		awaitReady(t, h.n) // the first failure is a first look
		h.quiet()
		require.NoError(t, h.srv.Start())
		assert.Equal(t, "pending", h.receive().Event)
		h.recovers()
	})
}

// Until the VM's name is known, no event can be told to be this VM's:
// nothing is reported, and the document is not even asked for.
func TestFaultVMName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(*azuretest.Server)
		want    string
	}{
		{"503", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Status: http.StatusServiceUnavailable})
		}, "azure: VM name: HTTP 503: Service Unavailable"},
		{"hung", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Hang: true})
		}, "azure: VM name: no answer within 100ms: context deadline exceeded"},
		{"empty", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Status: http.StatusOK})
		}, `azure: VM name: the answer is not an Azure VM name: ""`},
		{"blank", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Body: " \n"})
		}, `azure: VM name: the answer is not an Azure VM name: ""`},
		{"too long", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, Body: strings.Repeat("v", 65)})
		}, `azure: VM name: the answer is not an Azure VM name: "` + strings.Repeat("v", 40) + `…"`},
		{"endless", func(s *azuretest.Server) {
			s.Inject(termsigtest.Fault{Key: azuretest.PathVMName, BodySize: termsigtest.EndlessBody})
		}, "azure: VM name: answer larger than 1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := quick()
			cfg.RequestTimeout = 100 * time.Millisecond
			h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) {
				tc.prepare(s)
				s.SetEvents(pending)
			}})
			assert.Equal(t, tc.want, h.failure())
			h.polls(azuretest.PathVMName, 3)
			h.quiet()
			assert.Zero(t, h.srv.Requests(azuretest.PathScheduledEvents), "the document was asked for before the name was known")
			h.srv.ClearFaults()
			assert.Equal(t, "pending", h.receive().Event)
			h.recovers()
		})
	}
}

// A redirect is refused, never followed, with the source's client or the
// caller's: the host it names gets nothing, and its document makes no
// notice.
func TestFaultRedirect(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, own := range []bool{true, false} {
			name := strconv.Itoa(code) + " own client"
			if !own {
				name = strconv.Itoa(code) + " caller's client"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				other := azuretest.NewServer() // the target, with an event
				defer other.Close()
				other.SetEvents(pending)
				from := newRedirector(t, code, other.URL)
				cfg := quick()
				cfg.Endpoint = from.URL
				if !own {
					tr := &http.Transport{}
					t.Cleanup(tr.CloseIdleConnections)
					cfg.HTTPClient = &http.Client{Transport: tr}
				}
				h := start(t, options{cfg: &cfg})
				assert.Equal(t, "azure: VM name: redirect refused (HTTP "+strconv.Itoa(code)+")", h.failure())
				from.wait(t, 3)
				assert.Empty(t, events(h.stopAndDrain()), "notices through a redirect")
				assert.Zero(t, other.Requests(""), "requests followed the redirect")
			})
		}
	}
	t.Run("the document only", func(t *testing.T) {
		other := azuretest.NewServer()
		defer other.Close()
		other.SetEvents(pending)
		from := newRedirector(t, http.StatusTemporaryRedirect, other.URL)
		cfg := quick()
		cfg.Endpoint, cfg.VMName = from.URL, "test-vm"
		h := start(t, options{cfg: &cfg})
		assert.Equal(t, "azure: scheduled events: redirect refused (HTTP 307)", h.failure())
		from.wait(t, 3)
		assert.Empty(t, events(h.stopAndDrain()))
		assert.Zero(t, other.Requests(""))
	})
}

// redirector answers every request with a redirect to the same path and
// query on another server, and counts them.
type redirector struct {
	*httptest.Server

	mu      sync.Mutex
	count   int
	changed chan struct{} // closed and replaced on every request
}

func newRedirector(t *testing.T, code int, to string) *redirector {
	r := &redirector{changed: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.count++
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		http.Redirect(w, req, to+req.URL.RequestURI(), code)
	}))
	t.Cleanup(r.Close)
	return r
}

// wait waits until the redirector has had k requests.
func (r *redirector) wait(t *testing.T, k int) {
	t.Helper()
	timeout := time.After(wait)
	for {
		r.mu.Lock()
		n, ch := r.count, r.changed
		r.mu.Unlock()
		if n >= k {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%d requests, want %d", n, k)
		}
	}
}

// An endless answer is cut off at 1 MiB with the caller's client too, and
// the source keeps polling, each poll reading at most that much.
func TestFaultEndlessBodyCallersClient(t *testing.T) {
	ct := newCountingTransport(t)
	cfg := quick()
	cfg.HTTPClient = &http.Client{Transport: ct}
	h := start(t, options{cfg: &cfg})
	h.polls(azuretest.PathScheduledEvents, 1)
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, BodySize: termsigtest.EndlessBody})
	h.srv.SetEvents(pending)
	assert.Equal(t, "azure: scheduled events: answer larger than 1 MiB", h.failure())
	h.polls(azuretest.PathScheduledEvents, 5)
	h.quiet()
	h.srv.ClearFaults()
	assert.Equal(t, "pending", h.receive().Event)
	h.recovers()
}

// A bad answer does not read as "every event is gone": no Cleared.
func TestFaultClearsNothing(t *testing.T) {
	h := start(t, options{})
	h.srv.SetEvents(pending)
	assert.Equal(t, "pending", h.receive().Event)
	// One HTML page, one empty document of another shape, then 503s:
	// faults apply in the order injected.
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Count: 1, Body: "<html>oops</html>"})
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Count: 1, Body: `{"Events": []}`})
	h.srv.Inject(termsigtest.Fault{Key: azuretest.PathScheduledEvents, Status: http.StatusServiceUnavailable})
	h.failure()
	h.polls(azuretest.PathScheduledEvents, 4)
	h.quiet()
	h.srv.ClearFaults()
	h.recovered()
	h.polls(azuretest.PathScheduledEvents, 2)
	assert.Empty(t, events(h.stopAndDrain()))
}

// After failures the source backs off: each wait at least half the step
// (jitter takes the upper half), the steps doubling from Interval.
func TestFaultBackoff(t *testing.T) {
	ct := newCountingTransport(t)
	cfg := quick()
	cfg.Interval, cfg.MaxBackoff = 20*time.Millisecond, 80*time.Millisecond
	cfg.VMName = "test-vm"
	cfg.HTTPClient = &http.Client{Transport: ct}
	h := start(t, options{cfg: &cfg, prepare: func(s *azuretest.Server) {
		s.Inject(termsigtest.Fault{Status: http.StatusServiceUnavailable})
	}})
	times := ct.waitRequests(t, 7)
	h.n.Stop()
	steps := []time.Duration{20, 40, 80, 80, 80, 80} // ms: the backoff before request i+1
	for i, step := range steps {
		gap := times[i+1].Sub(times[i])
		assert.GreaterOrEqual(t, gap, step*time.Millisecond/2, "wait %d: %v", i, gap)
	}
}
