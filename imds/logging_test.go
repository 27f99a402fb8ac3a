package imds_test

import (
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
)

// countingClient is an HTTP client that counts the requests for each
// metadata path, so that a test can wait for polls of an endpoint that no
// server answers.
type countingClient struct {
	http *http.Client
	tr   *http.Transport

	mu      sync.Mutex
	counts  map[string]int
	changed chan struct{} // closed and replaced on every request
}

func newCountingClient() *countingClient {
	c := &countingClient{tr: &http.Transport{}, counts: map[string]int{}, changed: make(chan struct{})}
	c.http = &http.Client{Transport: c}
	return c
}

func (c *countingClient) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.tr.RoundTrip(r)
	c.mu.Lock()
	c.counts[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return res, err
}

// wait waits until path has been requested k times in all.
func (c *countingClient) wait(t *testing.T, path string, k int) {
	t.Helper()
	timeout := time.After(wait)
	for {
		c.mu.Lock()
		n, ch := c.counts[path], c.changed
		c.mu.Unlock()
		if n >= k {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%s requested %d times, want %d", path, n, k)
		}
	}
}

// closedPort returns the address of a loopback port that nobody listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// One outage is one text, whichever path sees it and however often: the
// Notifier logs one line for it, and the text carries no URL.
func TestFaultOneLogLinePerOutage(t *testing.T) {
	hc := newCountingClient()
	defer hc.tr.CloseIdleConnections()
	logs := testlog.New()
	cfg := intervals(imds.Config{
		Endpoint: "http://" + closedPort(t), HTTPClient: hc.http, Interval: 10 * time.Millisecond, AdvisoryInterval: 10 * time.Millisecond,
		RequestTimeout: 200 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: logs.Logger(),
	}, imds.DefaultFastInterval, 10*time.Millisecond)
	n := termsig.Config{Logger: logs.Logger()}.New(imds.New(*cfg))
	defer n.Stop()
	for _, p := range []string{imdstest.PathInstanceAction, imdstest.PathLifecycle, imdstest.PathRebalance, imdstest.PathScheduled} {
		hc.wait(t, p, 4)
	}
	n.Stop()

	recs := logs.Records(failing)
	require.Len(t, recs, 1, "one outage, one line")
	text := testlog.Attr(recs[0], "err")
	assert.NotContains(t, text, "http")
	assert.NotContains(t, text, "latest")
	assert.NotContains(t, text, "127.0.0.1")
	if runtime.GOOS != "windows" {
		assert.Equal(t, "imds: unreachable: connection refused", text)
	}
}

// The source logs its notices at debug level and nothing else: health is
// the Notifier's to log.
func TestSourceLogsOnlyNoticesAtDebug(t *testing.T) {
	h := start(t, nil, nil)
	h.srv.SetInterruption("terminate", deadline)
	h.receive()
	h.srv.Stop()
	h.logs.WaitFor(t, failing, 1)
	require.NoError(t, h.srv.Start())
	h.logs.WaitFor(t, recovered, 1)
	h.n.Stop()

	own := 0
	for _, r := range h.logs.Records("") {
		if strings.HasPrefix(r.Message, "imds:") {
			own++
			assert.Equal(t, slog.LevelDebug, r.Level, "%s", r.Message)
		}
	}
	assert.Equal(t, 1, h.logs.Count("imds: notice"))
	assert.Equal(t, 1, own)
}
