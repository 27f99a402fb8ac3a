package tencent_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/internal/testlog"
	"github.com/termsig/termsig/tencent"
	"github.com/termsig/termsig/tencent/tencenttest"
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

// deadline is a reclaim time in whole seconds, as the service writes it
// (in UTC+8), two minutes ahead, as Tencent posts it (a time an hour away
// from now or more is no reclaim time).
var deadline = time.Now().Add(2 * time.Minute).Truncate(time.Second).UTC()

var quiet = termsig.Config{Logger: slog.New(slog.DiscardHandler)}

// fast polls every 10 ms and backs off for at most 40 ms, so that tests
// see many polls quickly, with a request timeout that a loaded machine
// does not hit; tests of timeouts set their own.
func fast(srv *tencenttest.Server) tencent.Config {
	return tencent.Config{
		Endpoint:       srv.URL,
		Interval:       tencent.FloorInterval,
		RequestTimeout: time.Second,
		MaxBackoff:     40 * time.Millisecond,
	}
}

// A harness runs one tencent Source under a Notifier against a fake.
type harness struct {
	t    *testing.T
	srv  *tencenttest.Server
	n    *termsig.Notifier
	logs *testlog.Recorder // the Notifier's: health changes
}

// start runs a source configured by cfg (fast if nil; an empty Endpoint
// is the fake's) against a new fake, which prepare may set up first. The
// Notifier stops, then the fake closes, when the test ends.
func start(t *testing.T, cfg *tencent.Config, prepare func(*tencenttest.Server)) *harness {
	t.Helper()
	srv := tencenttest.NewServer()
	t.Cleanup(srv.Close)
	if prepare != nil {
		prepare(srv)
	}
	c := fast(srv)
	if cfg != nil {
		c = *cfg
		if c.Endpoint == "" {
			c.Endpoint = srv.URL
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	logs := testlog.New()
	n := termsig.Config{Logger: logs.Logger()}.New(tencent.New(c))
	t.Cleanup(n.Stop)
	return &harness{t: t, srv: srv, n: n, logs: logs}
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

// polls waits until the fake has answered k more polls, so that the test
// knows the source has seen the fake's current state.
func (h *harness) polls(k int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	target := h.srv.Requests(tencenttest.PathTerminationTime) + k
	if err := h.srv.AwaitRequests(ctx, tencenttest.PathTerminationTime, target); err != nil {
		h.t.Fatalf("polled %d times, want %d", h.srv.Requests(tencenttest.PathTerminationTime), target)
	}
}

// quiet checks that no notice is waiting: call it after polls.
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
