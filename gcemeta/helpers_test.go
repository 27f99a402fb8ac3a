package gcemeta_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/gcemeta"
	"github.com/termsig/termsig/gcemeta/gcemetatest"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// What the Notifier logs when a source reports an error, or reports itself
// healthy again: gcemeta does not log its health itself.
const (
	logFailing = "termsig: source error, retrying"
	logHealthy = "termsig: source healthy again"
)

// wait is how long a test waits for something that should happen at once.
// It is long so that a slow -race run does not fail; a pass takes far less.
const wait = 5 * time.Second

// fast returns a Config for srv with short intervals, so that retries take
// milliseconds. WaitTimeout stays at its default: a long poll waits until
// the value changes or the test ends.
func fast(srv *gcemetatest.Server) gcemeta.Config {
	return gcemeta.WithBackoff(gcemeta.Config{
		Host:           srv.Host(),
		MinInterval:    gcemeta.FloorInterval,
		MaxBackoff:     20 * time.Millisecond,
		RequestTimeout: 2 * time.Second,
	}, gcemeta.FloorInterval)
}

// harness runs a gcemeta source under a Notifier against a fake server,
// with both logging into one recorder.
type harness struct {
	srv  *gcemetatest.Server
	n    *termsig.Notifier
	logs *logRecorder
}

// run starts the source with cfg (its Logger is set to the recorder) and
// registers the cleanup: Stop, then Close the server.
func run(t *testing.T, srv *gcemetatest.Server, cfg gcemeta.Config) *harness {
	t.Helper()
	logs := newLogRecorder()
	cfg.Logger = logs.logger()
	n := termsig.Config{Logger: logs.logger()}.New(gcemeta.New(cfg))
	t.Cleanup(n.Stop)
	return &harness{srv: srv, n: n, logs: logs}
}

// newServer starts a fake and closes it when the test ends (after the
// Notifier has stopped: cleanups run last-in first-out).
func newServer(t *testing.T) *gcemetatest.Server {
	t.Helper()
	srv := gcemetatest.NewServer()
	t.Cleanup(srv.Close)
	return srv
}

// await waits until cond holds, re-checking it at every change of the
// fake's counters and values.
func await(t *testing.T, srv *gcemetatest.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := srv.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// awaitPolling waits until the source is waiting on a long poll for key.
func awaitPolling(t *testing.T, srv *gcemetatest.Server, key string) {
	t.Helper()
	await(t, srv, "a long poll on "+key, func() bool { return srv.Waiting(key) == 1 })
}

// flip sets key to value and waits until the source has taken the answer
// in and is waiting on its next long poll: whatever notice that value
// causes has been handed to the Notifier by then.
func flip(t *testing.T, srv *gcemetatest.Server, key, value string) {
	t.Helper()
	awaitPolling(t, srv, key)
	before := srv.Requests(key)
	srv.Set(key, value)
	await(t, srv, "the next long poll on "+key, func() bool {
		return srv.Requests(key) > before && srv.Waiting(key) == 1
	})
}

func receive(t *testing.T, n *termsig.Notifier) termsig.Notice {
	t.Helper()
	select {
	case nt, ok := <-n.C():
		require.True(t, ok, "C closed")
		return nt
	case <-time.After(wait):
		t.Fatal("no notice")
	}
	return termsig.Notice{}
}

// stopAndDrain stops the Notifier and returns every notice left on C:
// after Stop, nothing more can arrive, so this is how a test shows that
// no other notice was sent.
func stopAndDrain(n *termsig.Notifier) []termsig.Notice {
	n.Stop()
	var rest []termsig.Notice
	for nt := range n.C() {
		rest = append(rest, nt)
	}
	return rest
}

func kinds(nts []termsig.Notice) []string {
	var out []string
	for _, nt := range nts {
		out = append(out, nt.Kind.String()+": "+nt.Reason)
	}
	return out
}

// logRecorder adapts testlog.Recorder to these tests' calls.
type logRecorder struct{ *testlog.Recorder }

func newLogRecorder() *logRecorder { return &logRecorder{testlog.New()} }

func (l *logRecorder) logger() *slog.Logger { return l.Logger() }

// waitFor waits until a record with msg whose attributes, printed as
// "k=v" pairs, contain every string of attrs has been logged, and returns
// that line.
func (l *logRecorder) waitFor(t *testing.T, msg string, attrs ...string) string {
	t.Helper()
	var line string
	l.WaitUntil(t, fmt.Sprintf("log %q with %q", msg, attrs), func([]slog.Record) bool {
		var ok bool
		line, ok = l.find(msg, attrs...)
		return ok
	})
	return line
}

func (l *logRecorder) find(msg string, attrs ...string) (string, bool) {
next:
	for _, line := range l.lines(msg) {
		for _, a := range attrs {
			if !strings.Contains(line, a) {
				continue next
			}
		}
		return line, true
	}
	return "", false
}

func (l *logRecorder) count(msg string) int { return l.Count(msg) }

// lines returns the records with msg, each printed as find prints it.
func (l *logRecorder) lines(msg string) []string {
	var out []string
	for _, r := range l.Records(msg) {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

// countWith counts the records with msg whose printed attributes contain
// every string of attrs.
func (l *logRecorder) countWith(msg string, attrs ...string) int {
	n := 0
next:
	for _, line := range l.lines(msg) {
		for _, a := range attrs {
			if !strings.Contains(line, a) {
				continue next
			}
		}
		n++
	}
	return n
}

// roundTripper records requests and sends them to a fake, whatever host
// they were meant for.
type roundTripper struct {
	to *gcemetatest.Server
	tr *http.Transport

	mu   sync.Mutex
	reqs []*http.Request
}

func newRoundTripper(t *testing.T, to *gcemetatest.Server) *roundTripper {
	rt := &roundTripper{to: to, tr: &http.Transport{}}
	t.Cleanup(rt.tr.CloseIdleConnections)
	return rt
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.reqs = append(rt.reqs, req)
	rt.mu.Unlock()
	if rt.to == nil {
		return nil, errors.New("this test allows no network access")
	}
	r2 := req.Clone(req.Context())
	r2.URL.Host = rt.to.Host()
	r2.Host = ""
	return rt.tr.RoundTrip(r2)
}

func (rt *roundTripper) requests() []*http.Request {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]*http.Request(nil), rt.reqs...)
}
