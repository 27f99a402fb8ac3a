package httpguard_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig/internal/httpguard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 5 * time.Second

// client returns a client whose transport is guarded with maxBody.
func client(t *testing.T, maxBody int64) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return httpguard.Guard(&http.Client{Transport: tr}, maxBody)
}

// A redirect is an error, never followed: the host it names gets nothing.
func TestRedirectsAreRefused(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a redirect was followed")
	}))
	defer other.Close()
	for _, code := range []int{300, 301, 302, 303, 304, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", other.URL+"/x")
				w.WriteHeader(code)
			}))
			defer srv.Close()
			res, err := client(t, 1<<10).Get(srv.URL)
			if res != nil {
				res.Body.Close()
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, httpguard.ErrRedirect)
			var ge *httpguard.Error
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, "redirect refused (HTTP "+strconv.Itoa(code)+")", ge.Error())
		})
	}
}

// A body is read up to the limit; the read that would go past it fails.
func TestBodiesAreCapped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int64
		body   int  // bytes sent
		length bool // with a Content-Length
		read   int  // bytes the reader gets
		err    string
	}{
		{"under", 100, 99, false, 99, ""},
		{"at the limit", 100, 100, false, 100, ""},
		{"at the limit, length", 100, 100, true, 100, ""},
		{"one past", 100, 101, false, 100, "answer larger than 100 bytes"},
		{"far past", 64 << 10, 1 << 20, false, 64 << 10, "answer larger than 64 KiB"},
		{"length says too long", 1 << 20, 1<<20 + 1, true, 0, "answer larger than 1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.length {
					w.Header().Set("Content-Length", strconv.Itoa(tc.body))
				}
				w.WriteHeader(http.StatusNotFound) // any status: every body is capped
				if !tc.length {
					w.(http.Flusher).Flush() // chunked: the reader cannot tell the length
				}
				_, _ = io.WriteString(w, strings.Repeat("x", tc.body))
			}))
			defer srv.Close()
			res, err := client(t, tc.limit).Get(srv.URL)
			require.NoError(t, err)
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			assert.Len(t, b, tc.read)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.err)
			assert.ErrorIs(t, err, httpguard.ErrTooLarge)
			_, err = res.Body.Read(make([]byte, 10))
			assert.EqualError(t, err, tc.err, "and every read after")
		})
	}
}

// Guard leaves the client it copies alone.
func TestGuardCopies(t *testing.T) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	g := httpguard.Guard(c, 10)
	assert.Same(t, tr, c.Transport, "c unchanged")
	assert.Equal(t, time.Minute, g.Timeout)
	gt, ok := g.Transport.(*httpguard.Transport)
	require.True(t, ok)
	assert.Same(t, tr, gt.Base)

	var closed closer
	httpguard.Guard(&http.Client{Transport: &closed}, 10).CloseIdleConnections()
	assert.True(t, bool(closed), "CloseIdleConnections reaches the base through the Transport")

	assert.PanicsWithValue(t, "termsig: httpguard: Transport.MaxBody must be positive", func() {
		_, _ = (&httpguard.Transport{}).RoundTrip(httptest.NewRequest(http.MethodGet, "http://x/", nil))
	})
}

// closer is a RoundTripper that only records CloseIdleConnections.
type closer bool

func (c *closer) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("closer") }
func (c *closer) CloseIdleConnections()                           { *c = true }

// A dial of NewTransport's, lookup included, ends with the request that
// caused it, however long its own timeout: net/http would let it go on.
func TestDialEndsWithItsRequest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the system's resolver, which does not take a DNS server of the test's")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	lookups := make(chan context.Context, 16)
	dnsDial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		if network != "udp" {
			return nil, errors.New(network + " not served")
		}
		lookups <- ctx
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String()) // a DNS server that never answers
	}
	tr := httpguard.NewTransport(time.Hour, 1, dnsDial)
	defer tr.CloseIdleConnections()
	c := httpguard.Guard(&http.Client{Transport: tr}, 1<<10)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://metadata.termsig.test/", nil)
		_, err := c.Do(req)
		errc <- err
	}()
	var lookup context.Context
	select {
	case lookup = <-lookups:
	case <-time.After(wait):
		t.Fatal("no lookup")
	}
	cancel()
	select {
	case <-lookup.Done():
	case <-time.After(wait):
		t.Fatal("the lookup outlived its request")
	}
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("the request did not end")
	}
	goleak.VerifyNone(t) // the lookup's goroutines are gone too
}

// newTransport returns a transport of NewTransport's, guarded, closed when
// the test ends.
func newTransport(t *testing.T) *http.Client {
	tr := httpguard.NewTransport(time.Second, 4, nil)
	t.Cleanup(tr.CloseIdleConnections)
	return httpguard.Guard(&http.Client{Transport: tr}, 1<<20)
}

// rawServer serves each connection with serve, on its own goroutine, until
// the test ends, and counts the connections.
func rawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) (url string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	conns = new(atomic.Int32)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			})
		}
	})
	return "http://" + ln.Addr().String(), conns
}

// A server that sends an endless head costs a bounded amount of memory:
// the body cap does not see heads, NewTransport's limit does.
func TestHeadsAreCapped(t *testing.T) {
	const budget = 64 << 20
	wrote := make(chan int, 1)
	url, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		n, _ := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Endless: ")
		chunk := strings.Repeat("a", 64<<10)
		for n < budget {
			m, err := io.WriteString(c, chunk)
			n += m
			if err != nil {
				break
			}
		}
		wrote <- n
	})
	c := newTransport(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := c.Get(url)
	runtime.ReadMemStats(&after)
	if res != nil {
		res.Body.Close()
	}
	require.Error(t, err)
	n := <-wrote
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("server wrote %.1f MiB, client allocated %.1f MiB", float64(n)/(1<<20), float64(grew)/(1<<20))
	// net/http's default limit, 10 MiB, would read that much and more.
	assert.Less(t, n, 10<<20, "the client read past 1 MiB of head")
	assert.Less(t, grew, uint64(32<<20), "allocated for one head")
}

// A request that fails on a kept connection the server closed is sent
// again, on a new connection, only if it is idempotent: a GET is, a PUT
// (an IMDSv2 token) is not, and its failure is the caller's to see.
func TestOnlyIdempotentRequestsAreSentAgain(t *testing.T) {
	for _, tc := range []struct {
		method string
		again  bool
	}{
		{http.MethodGet, true},
		{http.MethodPut, false},
	} {
		t.Run(tc.method, func(t *testing.T) {
			var reqs atomic.Int32
			url, conns := rawServer(t, func(c net.Conn, br *bufio.Reader) {
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					// The second request: read, then hung up on, as by a
					// server that closed an idle connection meanwhile.
					if reqs.Add(1) == 2 {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			})
			c := newTransport(t)
			do := func() error {
				req, err := http.NewRequest(tc.method, url, strings.NewReader("x"))
				require.NoError(t, err)
				res, err := c.Do(req)
				if err != nil {
					return err
				}
				defer res.Body.Close()
				_, err = io.ReadAll(res.Body)
				return err
			}
			require.NoError(t, do()) // leaves the connection kept
			err := do()
			if tc.again {
				assert.NoError(t, err)
				assert.EqualValues(t, 3, reqs.Load(), "sent again")
				assert.EqualValues(t, 2, conns.Load(), "on a new connection")
				return
			}
			assert.Error(t, err)
			assert.EqualValues(t, 2, reqs.Load(), "not sent again")
		})
	}
}
