package imds_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// What the Notifier logs when the source reports an error, and when it
// reports itself healthy again: the source does not log its health.
const (
	failing   = "termsig: source error, retrying"
	recovered = "termsig: source healthy again"
)

// status returns the imds source's status.
func (h *harness) status() termsig.SourceStatus {
	st := h.n.Status()
	require.Len(h.t, st, 1)
	return st[0]
}

// recovers checks that after a fault the source still works: the error is
// cleared and a real interruption is reported once.
func (h *harness) recovers() {
	h.t.Helper()
	h.logs.WaitUntil(h.t, "recovery", func(all []slog.Record) bool {
		last := ""
		for _, r := range all {
			if r.Message == failing || r.Message == recovered {
				last = r.Message
			}
		}
		return last == recovered
	})
	h.srv.SetInterruption("terminate", deadline)
	n := h.receive()
	assert.Equal(h.t, termsig.Terminate, n.Kind)
	assert.Equal(h.t, termsig.StateRunning, h.status().State)
}

func TestFaultUnreachableThenBack(t *testing.T) {
	h := start(t, nil, func(s *imdstest.Server) { s.Stop() })
	rec := h.logs.WaitFor(t, failing, 1)
	assert.Contains(t, testlog.Attr(rec, "err"), "unreachable")
	st := h.status()
	assert.Equal(t, termsig.StateRunning, st.State)
	assert.ErrorContains(t, st.Err, "unreachable")

	require.NoError(t, h.srv.Start())
	h.recovers()
	assert.NoError(t, h.status().Err)
}

func TestFaultServerGoesAwayAndComesBack(t *testing.T) {
	h := start(t, nil, nil)
	h.polls(imdstest.PathInstanceAction, 2)
	h.srv.Stop()
	h.logs.WaitFor(t, failing, 1)
	h.quiet()
	require.NoError(t, h.srv.Start())
	h.recovers()
}

// A restarted IMDS forgets its tokens: the next request gets 401, and the
// SDK must fetch a new token without the source reporting anything false.
func TestFaultTokenExpired(t *testing.T) {
	h := start(t, nil, nil)
	h.polls(imdstest.PathInstanceAction, 2)
	before := h.srv.Requests("api/token")
	h.srv.ExpireTokens()
	h.polls(imdstest.PathInstanceAction, 4)
	assert.Greater(t, h.srv.Requests("api/token"), before, "a new token was fetched")
	assert.Zero(t, h.logs.Count(failing), "the 401 was tried again within its poll, with the new token")
	h.quiet()
	h.srv.SetInterruption("terminate", deadline)
	assert.Equal(t, termsig.Terminate, h.receive().Kind)
}

func TestFaultBursts(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h := start(t, nil, nil)
			h.polls(imdstest.PathInstanceAction, 1)
			h.srv.Inject(termsigtest.Fault{Count: 40, Status: status})
			rec := h.logs.WaitFor(t, failing, 1)
			assert.Contains(t, testlog.Attr(rec, "err"), "HTTP "+strconv.Itoa(status))
			assert.ErrorContains(t, h.status().Err, "HTTP "+strconv.Itoa(status))
			h.quiet()
			h.recovers()
			// Dozens of failed polls, a handful of log lines: once per change.
			assert.LessOrEqual(t, h.logs.Count(failing), 3)
		})
	}
}

func TestFaultSlowerThanRequestTimeout(t *testing.T) {
	cfg := intervals(imds.Config{
		Interval: 10 * time.Millisecond, AdvisoryInterval: 10 * time.Millisecond,
		RequestTimeout: 50 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	}, imds.DefaultFastInterval, 10*time.Millisecond)
	h := start(t, cfg, func(s *imdstest.Server) { s.Inject(termsigtest.Fault{Hang: true}) })
	rec := h.logs.WaitFor(t, failing, 1)
	assert.Contains(t, testlog.Attr(rec, "err"), "no answer within 50ms")
	h.srv.SetInterruption("terminate", deadline)
	h.logs.WaitFor(t, failing, 1)
	h.quiet()
	h.srv.ClearFaults()
	h.recovers()
}

func TestFaultBadBodies(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
	}{
		{"truncated JSON", imdstest.PathInstanceAction, `{"action": "terminate", "time": "2026-11-30T1`},
		{"invalid JSON", imdstest.PathInstanceAction, `{action: terminate}`},
		{"unknown action", imdstest.PathInstanceAction, `{"action": "explode", "time": "2026-11-30T10:02:00Z"}`},
		{"no action", imdstest.PathInstanceAction, `{"time": "2026-11-30T10:02:00Z"}`},
		{"HTML 200", imdstest.PathInstanceAction, "<html><body>Welcome to the captive portal</body></html>"},
		{"empty 200", imdstest.PathInstanceAction, ""},
		{"HTML lifecycle", imdstest.PathLifecycle, "<html><body>Terminated</body></html>"},
		{"HTML rebalance", imdstest.PathRebalance, "<html>rebalance</html>"},
		{"scheduled object", imdstest.PathScheduled, `{"Code": "system-reboot"}`},
		{"scheduled truncated", imdstest.PathScheduled, `[{"Code": "system-reboot", "EventId": "instance-event-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil, nil)
			h.srv.Inject(termsigtest.Fault{Key: tc.path, Status: http.StatusOK, Body: tc.body})
			rec := h.logs.WaitFor(t, failing, 1)
			assert.Contains(t, testlog.Attr(rec, "err"), "invalid payload")
			assert.ErrorContains(t, h.status().Err, tc.path)
			h.polls(tc.path, 3)
			h.quiet()
			h.srv.ClearFaults()
			h.recovers()
		})
	}
}

// A bad answer must not read as "every scheduled event is gone".
func TestFaultBadScheduledBodyClearsNothing(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetScheduledEvents(imdstest.ScheduledEvent{Code: "system-reboot", EventID: "e-1", NotBefore: deadline})
	assert.Equal(t, termsig.Maintenance, h.receive().Kind)
	// One HTML page, then 503s: faults apply in the order injected.
	h.srv.Inject(termsigtest.Fault{Key: imdstest.PathScheduled, Count: 1, Body: "<html>oops</html>"})
	h.srv.Inject(termsigtest.Fault{Key: imdstest.PathScheduled, Status: http.StatusServiceUnavailable})
	h.logs.WaitFor(t, failing, 1)
	h.polls(imdstest.PathScheduled, 3)
	h.srv.ClearFaults()
	h.logs.WaitFor(t, recovered, 1)
	h.polls(imdstest.PathScheduled, 2)
	h.quiet()
}

// Stop returns within 100 ms whatever the server does.
func TestStopIsPromptWhateverTheServerDoes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(*imdstest.Server)
	}{
		{"hanging", func(s *imdstest.Server) { s.Inject(termsigtest.Fault{Hang: true}) }},
		{"gone", func(s *imdstest.Server) { s.Stop() }},
		{"503", func(s *imdstest.Server) { s.Inject(termsigtest.Fault{Status: http.StatusServiceUnavailable}) }},
		{"healthy", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
				cfg := imds.Config{} // default intervals and timeouts: the slow case
				h := start(t, &cfg, tc.prepare)
				h.busy(tc.name)
				start := time.Now()
				h.n.Stop()
				return time.Since(start)
			})
		})
	}
}

// busy waits until the source is in the middle of what the case is about:
// a request held by the server, failing polls, or a served poll.
func (h *harness) busy(name string) {
	h.t.Helper()
	switch name {
	case "hanging":
		timeout := time.After(wait)
		for {
			served := h.srv.Served()
			if h.srv.InFlight() > 0 {
				return
			}
			select {
			case <-served:
			case <-timeout:
				h.t.Fatal("no request arrived")
			}
		}
	case "healthy":
		h.polls(imdstest.PathInstanceAction, 1)
	default:
		h.logs.WaitFor(h.t, failing, 1)
	}
}

// Only a 401 is tried again within a poll (with a fresh token); a 503 or
// a 429 ends the poll and the source backs off, so that a throttled IMDS
// that refuses every other request gets no more requests than the budget
// of issue 14 (2.5 a second idle, 10 under advice; here with every
// interval a tenth of the default).
func TestThrottledIMDSStaysWithinBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		advised bool
		budget  float64 // requests a second, at a tenth of the intervals
	}{
		{"idle", false, 25},
		{"under advice", true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := intervals(imds.Config{
				Interval:         100 * time.Millisecond,
				AdvisoryInterval: 300 * time.Millisecond,
				RequestTimeout:   time.Second,
				MaxBackoff:       time.Second,
			}, 25*time.Millisecond, 3*time.Second)
			h := start(t, cfg, func(s *imdstest.Server) {
				s.SetLifecycleState("InService")
				if tc.advised {
					s.SetRebalance(deadline)
				}
				for range 1000 {
					for _, p := range []string{imdstest.PathInstanceAction, imdstest.PathLifecycle} {
						s.Inject(termsigtest.Fault{Key: p, Count: 1, Status: 503})
						s.Inject(termsigtest.Fault{Key: p, Count: 1}) // let through
					}
				}
			})
			if tc.advised {
				assert.Equal(t, termsig.Rebalance, h.receive().Kind)
			}
			h.polls(imdstest.PathLifecycle, 6) // in the group, at its cadence
			all := func() int {
				n := 0
				for _, p := range []string{imdstest.PathInstanceAction, imdstest.PathLifecycle, imdstest.PathRebalance, imdstest.PathScheduled, "api/token"} {
					n += h.srv.Requests(p)
				}
				return n
			}
			t0, c0 := time.Now(), all()
			h.polls(imdstest.PathRebalance, 4) // about a second
			rate := float64(all()-c0) / time.Since(t0).Seconds()
			t.Logf("%.1f requests/s (budget %.0f)", rate, tc.budget)
			assert.LessOrEqual(t, rate, tc.budget)
			h.quiet()
		})
	}
}
