package alibaba_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/alibaba"
	"github.com/termsig/termsig/alibaba/alibabatest"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds how long a test waits for something that should happen
// quickly; a pass takes far less.
const wait = 5 * time.Second

// What the Notifier logs when the source reports an error, and when it
// reports itself healthy again: the source does not log its health.
const (
	failing = "termsig: source error, retrying"
	healthy = "termsig: source healthy again"
)

// What the source logs when it reads without a token, and when it reads
// with one again.
const (
	normalMode   = "alibaba: no metadata token; reading in normal mode (without a token)"
	hardenedMode = "alibaba: reading in security hardening mode (with a token)"
)

// deadline is a release time in whole seconds, as the service writes it,
// five minutes ahead, as Alibaba posts it (a time an hour away from now
// or more is no release time).
var deadline = time.Now().Add(5 * time.Minute).Truncate(time.Second).UTC()

var quiet = termsig.Config{Logger: slog.New(slog.DiscardHandler)}

// fast polls every 10 ms and backs off for at most 40 ms, so that tests
// see many polls quickly, with a request timeout that a loaded machine
// does not hit; tests of timeouts set their own.
func fast(srv *alibabatest.Server) alibaba.Config {
	return alibaba.Config{
		Endpoint:       srv.URL,
		Interval:       alibaba.FloorInterval,
		RequestTimeout: time.Second,
		MaxBackoff:     40 * time.Millisecond,
	}
}

// A harness runs one alibaba Source under a Notifier against a fake.
type harness struct {
	t    *testing.T
	srv  *alibabatest.Server
	n    *termsig.Notifier
	logs *testlog.Recorder // the Notifier's: health changes
	own  *testlog.Recorder // the source's Config.Logger
}

// start runs a source configured by cfg (fast if nil; an empty Endpoint
// is the fake's) against a new fake, which prepare may set up first. The
// Notifier stops, then the fake closes, when the test ends.
func start(t *testing.T, cfg *alibaba.Config, prepare func(*alibabatest.Server)) *harness {
	t.Helper()
	srv := alibabatest.NewServer()
	t.Cleanup(srv.Close)
	if prepare != nil {
		prepare(srv)
	}
	return startOn(t, srv, cfg)
}

// startOn runs a source as start does, against srv, which the test closes.
func startOn(t *testing.T, srv *alibabatest.Server, cfg *alibaba.Config) *harness {
	t.Helper()
	c := fast(srv)
	if cfg != nil {
		c = *cfg
		if c.Endpoint == "" {
			c.Endpoint = srv.URL
		}
	}
	own := testlog.New()
	if c.Logger == nil {
		c.Logger = own.Logger()
	}
	logs := testlog.New()
	n := termsig.Config{Logger: logs.Logger()}.New(alibaba.New(c))
	t.Cleanup(n.Stop)
	return &harness{t: t, srv: srv, n: n, logs: logs, own: own}
}

// receive returns the next notice, failing the test if none comes.
func (h *harness) receive() termsig.Notice {
	h.t.Helper()
	select {
	case nt := <-h.n.C():
		return nt
	case <-time.After(wait):
		h.t.Fatalf("no notice; status: %+v", h.n.Status())
	}
	return termsig.Notice{}
}

// polls waits until the fake has answered k more requests for key, so
// that the test knows the source has seen the fake's current state.
func (h *harness) polls(key string, k int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	target := h.srv.Requests(key) + k
	if err := h.srv.AwaitRequests(ctx, key, target); err != nil {
		h.t.Fatalf("%s answered %d times, want %d", key, h.srv.Requests(key), target)
	}
}

// quiet checks that no notice is waiting: call it after polls, when every
// notice the polls could cause has been handed over.
func (h *harness) quiet() {
	h.t.Helper()
	select {
	case nt := <-h.n.C():
		h.t.Fatalf("unexpected notice: %v", nt)
	default:
	}
}

// status returns the source's status.
func (h *harness) status() termsig.SourceStatus {
	st := h.n.Status()
	require.Len(h.t, st, 1)
	return st[0]
}

// stop stops the Notifier and returns the notices still on C.
func (h *harness) stop() []termsig.Notice {
	h.n.Stop()
	var left []termsig.Notice
	for nt := range h.n.C() {
		left = append(left, nt)
	}
	return left
}
