package imds_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/httpguard/guardtest"
	"github.com/termsig/termsig/internal/timing"
	"github.com/termsig/termsig/termsigtest"
)

// allocated returns how many bytes the process allocated while f ran. It
// bounds from above how much the heap grew meanwhile, peaks included,
// which sampling the heap could miss; and it does not depend on when the
// scheduler of a loaded machine runs what.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An answer of IMDS is a few hundred bytes: one that goes on past 1 MiB is
// an error, cut off before the SDK reads it whole, on whatever path and
// with whatever status, and for the token too.
func TestHugeBodiesAreCutOff(t *testing.T) {
	const cut = "imds: answer larger than 1 MiB"
	// Without a token, the SDK goes on without one (as IMDSv1), and IMDS
	// answers 401: the SDK keeps what the token's answer was to itself.
	const noToken = "imds: http response error StatusCode: 401, request to EC2 IMDS failed"
	for _, tc := range []struct {
		name, key string
		status    int
		size      int64
		want      string
	}{
		{"200 endless", imdstest.PathInstanceAction, http.StatusOK, termsigtest.EndlessBody, cut},
		{"200 100 MB", imdstest.PathInstanceAction, http.StatusOK, 100 << 20, cut},
		{"404 100 MB", imdstest.PathInstanceAction, http.StatusNotFound, 100 << 20, cut},
		{"404 endless", imdstest.PathInstanceAction, http.StatusNotFound, termsigtest.EndlessBody, cut},
		{"token 100 MB", "api/token", http.StatusOK, 100 << 20, noToken},
		{"token endless", "api/token", http.StatusOK, termsigtest.EndlessBody, noToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// RequestTimeout stays at its default (2 s): a slow -race run
			// must see each poll fail on its answer, not on the clock.
			cfg := imds.Config{Interval: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Events: imds.SpotInterruption}
			var h *harness
			var err error
			grew := allocated(func() {
				h = start(t, &cfg, func(s *imdstest.Server) {
					s.SetInterruption("terminate", deadline) // what a full read of IMDS would say
					s.Inject(termsigtest.Fault{Key: tc.key, Status: tc.status, BodySize: tc.size})
				})
				h.logs.WaitFor(t, failing, 1)
				h.polls(tc.key, 3)
				err = h.status().Err
				h.n.Stop()
			})
			answers := h.srv.Requests(tc.key)
			t.Logf("allocated %.1f MiB for %d answers", float64(grew)/(1<<20), answers)
			// Without the cut, 100 MB answers cost hundreds of MiB each.
			assert.Less(t, grew/uint64(answers), uint64(8<<20), "per answer: the heap grew by up to that")
			assert.EqualError(t, err, tc.want)
			for n := range h.n.C() {
				t.Errorf("notice from a cut-off answer: %v", n)
			}
		})
	}
}

// Stop returns within 100 ms while an answer streams: cut off, it takes
// neither the memory nor the time that reading it whole would.
func TestStopWhileABodyStreams(t *testing.T) {
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		srv := newStreamer(t)
		cfg := imds.Config{Endpoint: srv.URL, Logger: slog.New(slog.DiscardHandler)} // the defaults: the slow case
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(imds.New(cfg))
		defer n.Stop()
		select {
		case <-srv.busy:
		case <-time.After(wait):
			t.Fatal("no stream")
		}
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

// A streamer answers every request, the token's included, with a body
// that never ends. busy gets a value when the source is in the middle of
// reading one: once one stream has gone on past 512 MiB (the source reads
// it whole), or once one was cut off early (under 64 MiB, so by the
// source, not by its request timeout) and the next one has begun.
type streamer struct {
	*httptest.Server
	busy chan struct{}

	mu  sync.Mutex
	cut bool
}

func newStreamer(t *testing.T) *streamer {
	s := &streamer{busy: make(chan struct{}, 1)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.stream))
	t.Cleanup(s.Close)
	return s
}

func (s *streamer) stream(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.cut {
		s.signal()
	}
	s.mu.Unlock()
	chunk := make([]byte, 64<<10)
	for sent := 0; r.Context().Err() == nil; sent += len(chunk) {
		if sent >= 512<<20 {
			s.signal()
		}
		if _, err := w.Write(chunk); err != nil {
			s.mu.Lock()
			s.cut = s.cut || sent < 64<<20
			s.mu.Unlock()
			return
		}
	}
}

func (s *streamer) signal() {
	select {
	case s.busy <- struct{}{}:
	default:
	}
}

// A redirect is refused, never followed: the host it names gets nothing
// (not the token, not a request), and its answer makes no notice.
func TestRedirectsAreRefused(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			other := imdstest.NewServer() // would announce an interruption
			defer other.Close()
			other.SetInterruption("terminate", deadline)
			other.SetTokensOptional(true)
			from := newRedirector(t, code, other.URL)

			cfg := fastConfig(other)
			cfg.Endpoint = from.URL
			h := start(t, &cfg, nil)
			h.logs.WaitFor(t, failing, 1)
			from.wait(t, imdstest.PathInstanceAction, 3)
			assert.EqualError(t, h.status().Err, "imds: redirect refused (HTTP "+strconv.Itoa(code)+")")
			h.n.Stop()

			for n := range h.n.C() {
				t.Errorf("notice through a redirect: %v", n)
			}
			assert.Zero(t, other.Requests("api/token")+other.Requests(imdstest.PathInstanceAction), "requests followed the redirect")
		})
	}
}

// redirector is a server that answers every request with a redirect to
// the same path on another server, and counts them by metadata path.
type redirector struct {
	*httptest.Server

	mu      sync.Mutex
	counts  map[string]int
	changed chan struct{} // closed and replaced on every request
}

func newRedirector(t *testing.T, code int, to string) *redirector {
	r := &redirector{counts: map[string]int{}, changed: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.counts[strings.TrimPrefix(req.URL.Path, "/latest/meta-data/")]++
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		http.Redirect(w, req, to+req.URL.Path, code)
	}))
	t.Cleanup(r.Close)
	return r
}

// wait waits until path has been requested k times.
func (r *redirector) wait(t *testing.T, path string, k int) {
	t.Helper()
	timeout := time.After(wait)
	for {
		r.mu.Lock()
		n, ch := r.counts[path], r.changed
		r.mu.Unlock()
		if n >= k {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			require.FailNowf(t, "too few requests", "%s requested %d times, want %d", path, n, k)
		}
	}
}

// A spot document whose time is not a string is still an interruption, of
// its action, with the deadline unknown.
func TestSpotTimeNotAString(t *testing.T) {
	for _, tc := range []struct {
		body string
		kind termsig.Kind
	}{
		{`{"action": "terminate", "time": 1700000000}`, termsig.Terminate},
		{`{"action": "stop", "time": {"at": "2026-11-30T10:02:00Z"}}`, termsig.Stop},
		{`{"action": "hibernate", "time": null}`, termsig.Hibernate},
		{`{"action": "terminate", "time": ["2026-11-30T10:02:00Z"]}`, termsig.Terminate},
		{`{"action": "terminate", "time": true}`, termsig.Terminate},
		{`{"action": "terminate"}`, termsig.Terminate},
	} {
		t.Run(tc.body, func(t *testing.T) {
			h := start(t, nil, func(s *imdstest.Server) {
				s.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, Body: tc.body})
			})
			n := h.receive()
			assert.Equal(t, tc.kind, n.Kind)
			assert.True(t, n.Deadline.IsZero(), "deadline %v", n.Deadline)
			assert.Equal(t, tc.body, n.Raw)
			h.polls(imdstest.PathInstanceAction, 2)
			h.quiet()
			assert.NoError(t, h.status().Err)
		})
	}
}

// With a DNS server that never answers, Stop returns at once and leaves no
// lookup behind: Go's resolver would otherwise wait seconds for an answer.
// (Elsewhere than on Linux the system's resolver looks up, and the dial
// gives up on it at once: see httpguard.NewTransport. SilentDNS skips the
// test there.)
func TestStopEndsDNSLookups(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	timing.Within(t, 100*time.Millisecond, 3, func() time.Duration {
		dial, queried := guardtest.SilentDNS(t, wait)
		cfg := imds.WithDNSDial(imds.Config{Endpoint: "http://imds.termsig.test", Logger: slog.New(slog.DiscardHandler)}, dial)
		n := quietLog.New(imds.New(cfg))
		defer n.Stop()
		queried()
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

// The guards hold with a client of the program's own too: its transport
// would follow the redirect, and its body would go on.
func TestGuardsHoldWithTheProgramsClient(t *testing.T) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	own := &http.Client{Transport: tr}

	t.Run("redirect", func(t *testing.T) {
		other := imdstest.NewServer()
		defer other.Close()
		other.SetInterruption("terminate", deadline)
		other.SetTokensOptional(true)
		from := newRedirector(t, http.StatusTemporaryRedirect, other.URL)
		cfg := fastConfig(other)
		cfg.Endpoint, cfg.HTTPClient = from.URL, own
		h := start(t, &cfg, nil)
		h.logs.WaitFor(t, failing, 1)
		from.wait(t, imdstest.PathInstanceAction, 3)
		assert.EqualError(t, h.status().Err, "imds: redirect refused (HTTP 307)")
		h.n.Stop()
		for n := range h.n.C() {
			t.Errorf("notice through a redirect: %v", n)
		}
		assert.Zero(t, other.Requests("api/token")+other.Requests(imdstest.PathInstanceAction), "requests followed the redirect")
	})
	t.Run("endless body", func(t *testing.T) {
		cfg := imds.Config{HTTPClient: own, Interval: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Events: imds.SpotInterruption}
		h := start(t, &cfg, func(s *imdstest.Server) {
			s.Inject(termsigtest.Fault{Key: imdstest.PathInstanceAction, BodySize: termsigtest.EndlessBody})
		})
		h.logs.WaitFor(t, failing, 1)
		assert.EqualError(t, h.status().Err, "imds: answer larger than 1 MiB")
	})
	assert.Nil(t, own.CheckRedirect, "the program's client is not changed")
	assert.Same(t, tr, own.Transport, "the program's client is not changed")
}
