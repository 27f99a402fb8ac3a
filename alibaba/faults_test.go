package alibaba_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/internal/httpguard"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/termsigtest"
)

// No fault of the service makes a notice: each is an error in Status, in
// a stable text, and once the fault is gone the source reports a real
// termination time.
func TestFaultsAreErrorsNeverNotices(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault termsigtest.Fault
		want  string // the error in Status
	}{
		{"500", termsigtest.Fault{Status: http.StatusInternalServerError}, "alibaba: HTTP 500: Internal Server Error"},
		{"503", termsigtest.Fault{Status: http.StatusServiceUnavailable}, "alibaba: HTTP 503: Service Unavailable"},
		{"throttled", termsigtest.Fault{Status: http.StatusTooManyRequests}, "alibaba: HTTP 429: Too Many Requests"},
		{"refused", termsigtest.Fault{Key: alibabatest.PathTerminationTime, Status: http.StatusForbidden}, "alibaba: HTTP 403: Forbidden"},
		{"dropped", termsigtest.Fault{Drop: true}, "alibaba: connection closed without an answer"},
		{"html page", termsigtest.Fault{Key: alibabatest.PathTerminationTime, Body: "<html><body>Welcome</body></html>"},
			"alibaba: termination time: not an RFC 3339 time: 33 bytes of markup"},
		{"empty", termsigtest.Fault{Key: alibabatest.PathTerminationTime, Status: http.StatusOK}, "alibaba: termination time: empty answer"},
		{"no zone", termsigtest.Fault{Key: alibabatest.PathTerminationTime, Body: "2015-01-05 18:02:00"},
			"alibaba: termination time: not an RFC 3339 time: 19 bytes"},
		{"garbage", termsigtest.Fault{Key: alibabatest.PathTerminationTime, Body: "\x00\xff\x13garbage"},
			"alibaba: termination time: not an RFC 3339 time: 10 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil, func(s *alibabatest.Server) { s.Inject(tc.fault) })
			h.logs.WaitFor(t, failing, 1)
			h.polls(alibabatest.PathTerminationTime, 3)
			h.quiet()
			st := h.status()
			assert.Equal(t, termsig.StateRunning, st.State)
			assert.EqualError(t, st.Err, tc.want)
			assert.Equal(t, 1, h.logs.Count(failing), "one line per outage, not per poll")
			h.recovers()
		})
	}
}

// recovers checks that after a fault the source still works: the error
// is cleared and a real termination time is reported.
func (h *harness) recovers() {
	h.t.Helper()
	h.srv.ClearFaults()
	h.logs.WaitFor(h.t, healthy, 1)
	h.srv.SetTerminationTime(deadline)
	assert.Equal(h.t, termsig.Terminate, h.receive().Kind)
}

// A bad answer after a notice neither sends it again nor clears it: only
// a 404 clears.
func TestABadAnswerAfterANoticeChangesNothing(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	for _, f := range []termsigtest.Fault{
		{Key: alibabatest.PathTerminationTime, Count: 3, Status: http.StatusInternalServerError},
		{Key: alibabatest.PathTerminationTime, Count: 3, Body: "<html>"},
		{Key: alibabatest.PathTerminationTime, Count: 3, Drop: true},
	} {
		h.srv.Inject(f)
	}
	h.logs.WaitFor(t, failing, 1)
	h.logs.WaitFor(t, healthy, 1)
	h.polls(alibabatest.PathTerminationTime, 2)
	h.quiet()
}

// A service that goes away is "unreachable" in Status, and when it comes
// back, what it says is reported.
func TestAnUnreachableServiceThenBack(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.Stop() })
	rec := h.logs.WaitFor(t, failing, 1)
	assert.Contains(t, testlog.Attr(rec, "err"), "alibaba: unreachable: ")
	assert.NoError(t, h.srv.Start())
	h.logs.WaitFor(t, healthy, 1)
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// The first look ends when the first poll fails: Ready does not wait for
// a service that is not there.
func TestTheFirstLookEndsWithAFailure(t *testing.T) {
	h := start(t, nil, func(s *alibabatest.Server) { s.Stop() })
	select {
	case <-h.n.Ready():
	case <-time.After(wait):
		t.Fatal("not ready")
	}
	assert.ErrorContains(t, h.status().Err, "unreachable")
}

// A service that does not answer costs RequestTimeout per poll: the
// error says so, and the first look ends then.
func TestAHungServiceTimesOut(t *testing.T) {
	cfg := alibaba.Config{Interval: alibaba.FloorInterval, RequestTimeout: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	h := start(t, &cfg, func(s *alibabatest.Server) {
		s.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Hang: true})
	})
	h.logs.WaitFor(t, failing, 1)
	assert.EqualError(t, h.status().Err, "alibaba: no answer within 50ms: context deadline exceeded")
	select {
	case <-h.n.Ready():
	case <-time.After(wait):
		t.Fatal("not ready")
	}
	h.recovers()
}

// A token request that hangs takes half the poll's time: the other half
// reads in normal mode, so the poll succeeds.
func TestAHungTokenRequestLeavesTimeForTheNormalMode(t *testing.T) {
	cfg := alibaba.Config{Interval: alibaba.FloorInterval, RequestTimeout: time.Second}
	h := start(t, &cfg, func(s *alibabatest.Server) {
		s.Inject(termsigtest.Fault{Key: alibabatest.KeyToken, Hang: true})
		s.SetTerminationTime(deadline)
	})
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
	assert.NoError(t, h.status().Err)
	h.own.WaitFor(t, normalMode, 1)
}

// Stop returns at once while a request hangs, and while an endless answer
// streams.
func TestStopIsPrompt(t *testing.T) {
	spotpolltest.StopIsPrompt(t,
		func() (spotpolltest.Fake, string) { srv := alibabatest.NewServer(); return srv, srv.URL },
		func(endpoint string) termsig.Source {
			return alibaba.New(alibaba.Config{Endpoint: endpoint, RequestTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)})
		})
}

// With an Endpoint that is a name and a DNS server that never answers,
// Stop returns at once and leaves no lookup behind.
func TestStopEndsDNSLookups(t *testing.T) {
	spotpolltest.StopEndsDNSLookups(t, func(endpoint string, dial httpguard.DialFunc) termsig.Source {
		return alibaba.New(alibaba.WithDNSDial(alibaba.Config{Endpoint: endpoint, Logger: slog.New(slog.DiscardHandler)}, dial))
	})
}

// Throttling (429s) backs off: the polls are spaced out, up to
// MaxBackoff, instead of coming every Interval.
func TestThrottlingBacksOff(t *testing.T) {
	cfg := alibaba.Config{Interval: alibaba.FloorInterval, MaxBackoff: 80 * time.Millisecond}
	h := start(t, &cfg, func(s *alibabatest.Server) {
		s.Inject(termsigtest.Fault{Key: alibabatest.PathTerminationTime, Status: http.StatusTooManyRequests})
	})
	h.polls(alibabatest.PathTerminationTime, 1)
	begin, before := time.Now(), h.srv.Requests(alibabatest.PathTerminationTime)
	h.polls(alibabatest.PathTerminationTime, 6)
	took := time.Since(begin)
	// Without backoff six polls take 60 ms; with it, the waits before them
	// take at least 5+10+20+40+40+40 ms (steps of 10, 20, 40 and 80 ms,
	// each wait drawn from the upper half of its step).
	assert.GreaterOrEqual(t, took, 155*time.Millisecond, "%d polls in %v", h.srv.Requests(alibabatest.PathTerminationTime)-before, took)
}
