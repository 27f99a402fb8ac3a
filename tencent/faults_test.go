package tencent_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/httpguard"
	"github.com/termsig/termsig/internal/spotpoll/spotpolltest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
	"github.com/termsig/termsig/termsigtest"
)

// No fault of the service makes a notice: each is an error in Status, in
// a stable text, and once the fault is gone the source reports a real
// termination time.
func TestFaultsAreErrorsNeverNotices(t *testing.T) {
	const cut = "tencent: answer larger than 64 KiB"
	for _, tc := range []struct {
		name  string
		fault termsigtest.Fault
		want  string // the error in Status
	}{
		{"500", termsigtest.Fault{Status: http.StatusInternalServerError}, "tencent: HTTP 500: Internal Server Error"},
		{"throttled", termsigtest.Fault{Status: http.StatusTooManyRequests}, "tencent: HTTP 429: Too Many Requests"},
		{"refused", termsigtest.Fault{Status: http.StatusForbidden}, "tencent: HTTP 403: Forbidden"},
		{"dropped", termsigtest.Fault{Drop: true}, "tencent: connection closed without an answer"},
		{"html page", termsigtest.Fault{Body: "<html><body>Welcome</body></html>"},
			"tencent: termination time: not a time such as 2018-08-18 12:05:33: 33 bytes of markup"},
		{"empty", termsigtest.Fault{Status: http.StatusOK}, "tencent: termination time: empty answer"},
		{"a date alone", termsigtest.Fault{Body: "2018-08-18"}, "tencent: termination time: not a time such as 2018-08-18 12:05:33: 10 bytes"},
		{"garbage", termsigtest.Fault{Body: "\x00\xff\x13garbage"}, "tencent: termination time: not a time such as 2018-08-18 12:05:33: 10 bytes"},
		{"200 endless", termsigtest.Fault{BodySize: termsigtest.EndlessBody}, cut},
		{"404 100 MB", termsigtest.Fault{Status: http.StatusNotFound, BodySize: 100 << 20}, cut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			var err error
			grew := spotpolltest.Allocated(func() {
				h = start(t, nil, func(s *tencenttest.Server) { s.Inject(tc.fault) })
				h.logs.WaitFor(t, failing, 1)
				h.polls(3)
				h.quiet()
				err = h.status().Err
			})
			assert.Less(t, grew/uint64(h.srv.Requests("")), uint64(8<<20), "per answer: the heap grew by up to that")
			assert.Equal(t, termsig.StateRunning, h.status().State)
			assert.EqualError(t, err, tc.want)
			assert.Equal(t, 1, h.logs.Count(failing), "one line per outage, not per poll")
			h.srv.ClearFaults()
			h.logs.WaitFor(t, healthy, 1)
			h.srv.SetTerminationTime(deadline)
			assert.Equal(t, termsig.Terminate, h.receive().Kind)
		})
	}
}

// A bad answer after a notice neither sends it again nor clears it: only
// a 404 clears.
func TestABadAnswerAfterANoticeChangesNothing(t *testing.T) {
	h := start(t, nil, func(s *tencenttest.Server) { s.SetTerminationTime(deadline) })
	h.receive()
	h.srv.Inject(termsigtest.Fault{Count: 3, Status: http.StatusServiceUnavailable})
	h.srv.Inject(termsigtest.Fault{Count: 3, Body: "<html>"})
	h.logs.WaitFor(t, failing, 1)
	h.logs.WaitFor(t, healthy, 1)
	h.polls(2)
	h.quiet()
}

// A service that goes away is "unreachable" in Status, the first look
// ends with it, and what the service says once it is back is reported.
func TestAnUnreachableServiceThenBack(t *testing.T) {
	h := start(t, nil, func(s *tencenttest.Server) { s.Stop() })
	rec := h.logs.WaitFor(t, failing, 1)
	assert.Contains(t, testlog.Attr(rec, "err"), "tencent: unreachable: ")
	select {
	case <-h.n.Ready():
	case <-time.After(wait):
		t.Fatal("not ready")
	}
	assert.NoError(t, h.srv.Start())
	h.logs.WaitFor(t, healthy, 1)
	h.srv.SetTerminationTime(deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

// A service that does not answer costs RequestTimeout per poll, and the
// error says so.
func TestAHungServiceTimesOut(t *testing.T) {
	cfg := tencent.Config{Interval: tencent.FloorInterval, RequestTimeout: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	h := start(t, &cfg, func(s *tencenttest.Server) { s.Inject(termsigtest.Fault{Hang: true}) })
	h.logs.WaitFor(t, failing, 1)
	assert.EqualError(t, h.status().Err, "tencent: no answer within 50ms: context deadline exceeded")
}

// Stop returns at once while a request hangs, and while an endless answer
// streams.
func TestStopIsPrompt(t *testing.T) {
	spotpolltest.StopIsPrompt(t,
		func() (spotpolltest.Fake, string) { srv := tencenttest.NewServer(); return srv, srv.URL },
		func(endpoint string) termsig.Source {
			return tencent.New(tencent.Config{Endpoint: endpoint, RequestTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)})
		})
}

// With the service named (as metadata.tencentyun.com is) and a DNS server
// that never answers, Stop returns at once and leaves no lookup behind.
func TestStopEndsDNSLookups(t *testing.T) {
	spotpolltest.StopEndsDNSLookups(t, func(endpoint string, dial httpguard.DialFunc) termsig.Source {
		return tencent.New(tencent.WithDNSDial(tencent.Config{Endpoint: endpoint, Logger: slog.New(slog.DiscardHandler)}, dial))
	})
}

// A redirect is refused, never followed, whoever made the HTTP client: the
// host it names gets no request, and its answer makes no notice; the
// program's client is not changed.
func TestRedirectsAreRefused(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, own := range []bool{true, false} {
			t.Run(strconv.Itoa(code)+map[bool]string{true: " own client", false: " caller's client"}[own], func(t *testing.T) {
				other := tencenttest.NewServer() // would announce a reclaim
				defer other.Close()
				other.SetTerminationTime(deadline)
				from := spotpolltest.NewRedirector(t, code, other.URL)
				cfg := fast(other)
				cfg.Endpoint = from.URL
				var tr *http.Transport
				if !own {
					tr = &http.Transport{}
					t.Cleanup(tr.CloseIdleConnections)
					cfg.HTTPClient = &http.Client{Transport: tr}
				}
				h := start(t, &cfg, nil)
				h.logs.WaitFor(t, failing, 1)
				from.Wait(t, 3, wait)
				assert.EqualError(t, h.status().Err, "tencent: redirect refused (HTTP "+strconv.Itoa(code)+")")
				assert.Empty(t, h.stop(), "notices through a redirect")
				assert.Zero(t, other.Requests(""), "requests followed the redirect")
				if !own {
					assert.Nil(t, cfg.HTTPClient.CheckRedirect, "the program's client is not changed")
					assert.Same(t, tr, cfg.HTTPClient.Transport, "the program's client is not changed")
				}
			})
		}
	}
}
