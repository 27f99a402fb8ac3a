package httpguard_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
