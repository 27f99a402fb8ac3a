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
	c, release := httpguard.Guard(&http.Client{Transport: tr}, maxBody)
	t.Cleanup(release)
	return c
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

// Guard leaves the client it copies alone, and uses its transport as it
// is unless that lets heads grow past 64 KiB.
func TestGuardCopies(t *testing.T) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	g, release := httpguard.Guard(c, 10)
	defer release()
	assert.Same(t, tr, c.Transport, "c unchanged")
	assert.Zero(t, tr.MaxResponseHeaderBytes, "c's transport unchanged")
	assert.Equal(t, time.Minute, g.Timeout)
	gt, ok := g.Transport.(*httpguard.Transport)
	require.True(t, ok)
	clone, ok := gt.Base.(*http.Transport)
	require.True(t, ok)
	assert.NotSame(t, tr, clone, "a clone with heads capped")
	assert.EqualValues(t, 64<<10, clone.MaxResponseHeaderBytes)

	capped := &http.Transport{MaxResponseHeaderBytes: 64 << 10}
	g, release = httpguard.Guard(&http.Client{Transport: capped}, 10)
	release()
	assert.Same(t, capped, g.Transport.(*httpguard.Transport).Base, "capped already: used as it is")

	var closed closer
	g, release = httpguard.Guard(&http.Client{Transport: &closed}, 10)
	release()
	assert.Same(t, &closed, g.Transport.(*httpguard.Transport).Base, "not an *http.Transport: used as it is")
	assert.False(t, bool(closed), "release closes only what Guard made")
	g.CloseIdleConnections()
	assert.True(t, bool(closed), "CloseIdleConnections reaches the base through the Transport")

	assert.PanicsWithValue(t, "termsig: httpguard: Transport.MaxBody must be positive", func() {
		_, _ = (&httpguard.Transport{}).RoundTrip(httptest.NewRequest(http.MethodGet, "http://x/", nil))
	})
}

// release closes the idle connections of the clone that Guard made: the
// caller's CloseIdleConnections does not reach them.
func TestReleaseClosesTheCloneConnections(t *testing.T) {
	closed := make(chan struct{}, 1)
	url, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				closed <- struct{}{} // the client hung up
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, release := httpguard.Guard(&http.Client{Transport: tr}, 10)
	res, err := c.Get(url)
	require.NoError(t, err)
	_, err = io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close() // the connection stays, idle
	tr.CloseIdleConnections()
	select {
	case <-closed:
		t.Fatal("the caller's transport held the connection")
	default:
	}
	release()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("release left the connection open")
	}
	release() // again: nothing
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
	c, release := httpguard.Guard(&http.Client{Transport: tr}, 1<<10)
	defer release()

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
	c, release := httpguard.Guard(&http.Client{Transport: tr}, 1<<20)
	t.Cleanup(release)
	return c
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

// A server that sends an endless head costs a bounded amount of memory,
// whoever made the transport: the body cap does not see heads; the
// transport's limit, 64 KiB, does. net/http's default, 10 MiB of tiny
// header lines, costs many times that.
func TestHeadsAreCapped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  func(dial httpguard.DialFunc) http.RoundTripper
		limit int // what the error says
	}{
		{"NewTransport", func(httpguard.DialFunc) http.RoundTripper {
			return httpguard.NewTransport(time.Second, 4, nil)
		}, 64 << 10},
		{"a caller's", func(dial httpguard.DialFunc) http.RoundTripper {
			return &http.Transport{DialContext: dial}
		}, 64 << 10},
		{"a caller's with 1 MiB", func(dial httpguard.DialFunc) http.RoundTripper {
			return &http.Transport{DialContext: dial, MaxResponseHeaderBytes: 1 << 20}
		}, 64 << 10},
		{"a caller's with less", func(dial httpguard.DialFunc) http.RoundTripper {
			return &http.Transport{DialContext: dial, MaxResponseHeaderBytes: 1 << 10}
		}, 1 << 10},
		{"http.DefaultTransport", func(httpguard.DialFunc) http.RoundTripper { return nil }, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				lines := "HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", 10<<10)
				for {
					if _, err := io.WriteString(c, lines); err != nil {
						return
					}
					lines = strings.TrimPrefix(lines, "HTTP/1.1 200 OK\r\n")
				}
			})
			var read atomic.Int64
			dial := func(ctx context.Context, network, address string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, address)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: c, n: &read}, nil
			}
			base := tc.base(dial)
			if c, ok := base.(interface{ CloseIdleConnections() }); ok {
				t.Cleanup(c.CloseIdleConnections)
			}
			c, release := httpguard.Guard(&http.Client{Transport: base}, 1<<20)
			defer release()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res, err := c.Get(url)
			runtime.ReadMemStats(&after)
			if res != nil {
				res.Body.Close()
			}
			require.Error(t, err)
			assert.ErrorContains(t, err, "net/http: server response headers exceeded "+strconv.Itoa(tc.limit)+" bytes; aborted")
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("client read %d bytes, allocated %.1f MiB", read.Load(), float64(grew)/(1<<20))
			if tc.name != "http.DefaultTransport" { // whose dials are not counted
				assert.LessOrEqual(t, read.Load(), int64(tc.limit), "bytes read")
			}
			assert.Less(t, grew, uint64(8<<20), "allocated for one head") // 180 MiB for 10 MiB
		})
	}
}

// countingConn counts the bytes read from it into n.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
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
