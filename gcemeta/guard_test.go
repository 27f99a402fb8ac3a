package gcemeta_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/internal/httpguard/guardtest"
	"github.com/termsig/termsig/termsigtest"
)

// A redirect is refused, never followed, whoever made the HTTP client: the
// host it names gets no request, and its answer makes no notice.
func TestRedirectsAreRefused(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, own := range []bool{true, false} {
			name := strconv.Itoa(code) + " own client"
			if !own {
				name = strconv.Itoa(code) + " caller's client"
			}
			t.Run(name, func(t *testing.T) {
				other := newServer(t) // would announce a preemption
				other.Set(preempted, "TRUE")
				from := newRedirector(t, code, other.URL)
				cfg := fast(other)
				cfg.Host = strings.TrimPrefix(from.URL, "http://")
				if !own {
					tr := &http.Transport{}
					t.Cleanup(tr.CloseIdleConnections)
					cfg.HTTPClient = &http.Client{Transport: tr}
				}
				h := run(t, other, cfg)
				h.logs.waitFor(t, logFailing)
				from.wait(t, preempted, 3)
				assert.ErrorContains(t, h.n.Status()[0].Err, ": redirect refused (HTTP "+strconv.Itoa(code)+")")
				assert.Empty(t, kinds(stopAndDrain(h.n)), "notices through a redirect")
				assert.Zero(t, other.Requests(preempted)+other.Requests(maintenance)+other.Requests(upcoming),
					"requests followed the redirect")
			})
		}
	}
}

// redirector is a server that answers every request with a redirect to
// the same path and query on another server, and counts them by key.
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
		r.counts[strings.TrimPrefix(req.URL.Path, "/computeMetadata/v1/")]++
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		w.Header().Set("Metadata-Flavor", "Google")
		http.Redirect(w, req, to+req.URL.RequestURI(), code)
	}))
	t.Cleanup(r.Close)
	return r
}

// wait waits until key has been requested k times.
func (r *redirector) wait(t *testing.T, key string, k int) {
	t.Helper()
	timeout := time.After(wait)
	for {
		r.mu.Lock()
		n, ch := r.counts[key], r.changed
		r.mu.Unlock()
		if n >= k {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			require.FailNowf(t, "too few requests", "%s requested %d times, want %d", key, n, k)
		}
	}
}

// An answer without "Metadata-Flavor: Google" is not the metadata
// server's: an error, whatever it says, never a notice; not even a 404
// that would say that the optional key is not served.
func TestAnswerWithoutFlavorIsAnError(t *testing.T) {
	const notServer = "answer without Metadata-Flavor: Google: not the metadata server"
	t.Run("TRUE", func(t *testing.T) {
		srv := newServer(t)
		srv.Inject(termsigtest.Fault{Key: preempted, Body: "TRUE", Foreign: true})
		h := run(t, srv, fast(srv))
		h.logs.waitFor(t, logFailing)
		assert.EqualError(t, h.n.Status()[0].Err, "gcemeta: "+preempted+": "+notServer)
		await(t, srv, "more requests", func() bool { return srv.Requests(preempted) >= 3 })
		srv.ClearFaults()
		h.logs.waitFor(t, logHealthy)
		srv.Set(preempted, "TRUE")
		assert.Equal(t, termsig.Terminate, receive(t, h.n).Kind, "the real preemption")
		assert.Empty(t, kinds(stopAndDrain(h.n)))
	})
	t.Run("404 of the optional key", func(t *testing.T) {
		srv := newServer(t)
		srv.Inject(termsigtest.Fault{Key: upcoming, Status: http.StatusNotFound, Foreign: true})
		h := run(t, srv, fast(srv))
		h.logs.waitFor(t, logFailing)
		assert.EqualError(t, h.n.Status()[0].Err, "gcemeta: "+upcoming+": "+notServer)
		srv.ClearFaults()
		srv.Set(upcoming, `{"type":"SCHEDULED","maintenance_status":"PENDING","window_start_time":"2026-12-01T10:00:00Z"}`)
		assert.Equal(t, termsig.Maintenance, receive(t, h.n).Kind, "still watched")
	})
}

// An answer longer than 64 KiB is cut off: an error, never a notice, with
// the source's client or the caller's.
func TestLongAnswersAreCutOff(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run("own client "+strconv.FormatBool(own), func(t *testing.T) {
			srv := newServer(t)
			srv.Inject(termsigtest.Fault{Key: preempted, BodySize: termsigtest.EndlessBody})
			cfg := fast(srv)
			if !own {
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				cfg.HTTPClient = &http.Client{Transport: tr}
			}
			h := run(t, srv, cfg)
			h.logs.waitFor(t, logFailing)
			assert.EqualError(t, h.n.Status()[0].Err, "gcemeta: "+preempted+": answer larger than 64 KiB")
			await(t, srv, "more requests", func() bool { return srv.Requests(preempted) >= 3 })
			assert.Empty(t, kinds(stopAndDrain(h.n)))
		})
	}
}

// With a DNS server that never answers, Stop returns at once and leaves no
// lookup behind: Go's resolver would otherwise wait seconds for an answer.
func TestStopEndsDNSLookups(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	promptly(t, func(t *testing.T) time.Duration {
		dial, queried := guardtest.SilentDNS(t, wait)
		cfg := gcemeta.WithDNSDial(gcemeta.Config{Host: "metadata.termsig.test", Logger: slog.New(slog.DiscardHandler)}, dial)
		n := termsig.Config{Logger: slog.New(slog.DiscardHandler)}.New(gcemeta.New(cfg))
		defer n.Stop()
		queried()
		start := time.Now()
		n.Stop()
		return time.Since(start)
	})
}

// A head that never ends is cut off at 64 KiB, with the source's client
// or the caller's: net/http's own limit, 10 MiB of tiny header lines,
// costs it many times that in memory.
func TestLongHeadsAreCutOff(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run("own client "+strconv.FormatBool(own), func(t *testing.T) {
			host := endlessHead(t)
			cfg := gcemeta.Config{Host: host, MaxBackoff: time.Minute}
			var read maxRead
			if !own {
				tr := &http.Transport{DialContext: read.dial}
				t.Cleanup(tr.CloseIdleConnections)
				cfg.HTTPClient = &http.Client{Transport: tr}
			}
			h := run(t, nil, cfg)
			h.logs.waitFor(t, logFailing)
			assert.ErrorContains(t, h.n.Status()[0].Err, "net/http: server response headers exceeded 65536 bytes; aborted")
			assert.Empty(t, kinds(stopAndDrain(h.n)))
			if !own {
				assert.LessOrEqual(t, read.max(), int64(64<<10), "bytes read from one connection")
			}
		})
	}
}

// endlessHead returns the host:port of a server that answers every
// request with a head of tiny lines that never ends, until the client
// hangs up. It closes when the test ends.
func endlessHead(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				lines := "HTTP/1.1 200 OK\r\nMetadata-Flavor: Google\r\n" + strings.Repeat("A: b\r\n", 10<<10)
				for {
					if _, err := io.WriteString(c, lines); err != nil {
						return
					}
					lines = lines[len("HTTP/1.1 200 OK\r\nMetadata-Flavor: Google\r\n"):]
				}
			})
		}
	})
	return ln.Addr().String()
}

// maxRead dials connections that count what is read from them, and
// remembers the most read from one.
type maxRead struct{ most atomic.Int64 }

func (m *maxRead) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, m: m}, nil
}

func (m *maxRead) max() int64 { return m.most.Load() }

type countingConn struct {
	net.Conn
	m *maxRead
	n atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	total := c.n.Add(int64(n))
	for {
		most := c.m.most.Load()
		if total <= most || c.m.most.CompareAndSwap(most, total) {
			break
		}
	}
	return n, err
}
