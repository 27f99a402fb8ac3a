package imds_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/termsig/termsig"
	"github.com/termsig/termsig/imds"
	"github.com/termsig/termsig/imds/imdstest"
	"github.com/termsig/termsig/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds how long a test waits for something that should happen
// quickly; a pass takes far less.
const wait = 5 * time.Second

// fastConfig polls every 10 ms, so that tests see many polls quickly.
func fastConfig(srv *imdstest.Server) imds.Config {
	return imds.WithMaintenanceInterval(imds.Config{
		Endpoint:         srv.URL,
		Interval:         10 * time.Millisecond,
		AdvisoryInterval: 10 * time.Millisecond,
		RequestTimeout:   200 * time.Millisecond,
		MaxBackoff:       40 * time.Millisecond,
	}, 10*time.Millisecond)
}

type harness struct {
	t    *testing.T
	srv  *imdstest.Server
	n    *termsig.Notifier
	logs *testlog.Recorder
}

// start runs an imds source configured by cfg (fastConfig if nil) against
// a new fake IMDS; prepare may set the fake up before the source starts.
// The Notifier and the source log to h.logs.
func start(t *testing.T, cfg *imds.Config, prepare func(*imdstest.Server)) *harness {
	t.Helper()
	srv := imdstest.NewServer()
	if prepare != nil {
		prepare(srv)
	}
	c := fastConfig(srv)
	if cfg != nil {
		c = *cfg
		if c.Endpoint == "" {
			c.Endpoint = srv.URL
		}
	}
	logs := testlog.New()
	if c.Logger == nil {
		c.Logger = logs.Logger()
	}
	n := termsig.Config{Logger: logs.Logger()}.New(imds.New(c))
	t.Cleanup(func() {
		n.Stop()
		srv.Close()
	})
	return &harness{t: t, srv: srv, n: n, logs: logs}
}

func (h *harness) receive() termsig.Notice {
	h.t.Helper()
	select {
	case n := <-h.n.C():
		return n
	case <-time.After(wait):
		h.t.Fatal("no notice")
	}
	return termsig.Notice{}
}

// polls waits until the fake has answered k more requests for path, so
// that a test knows the source has seen the current state k times.
func (h *harness) polls(path string, k int) {
	h.t.Helper()
	target := h.srv.Requests(path) + k
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := h.srv.AwaitRequests(ctx, path, target); err != nil {
		h.t.Fatalf("%s polled %d times, want %d", path, h.srv.Requests(path), target)
	}
}

// quiet checks that no notice is waiting: call it after polls, when every
// notice the polls could cause has been handed over.
func (h *harness) quiet() {
	h.t.Helper()
	select {
	case n := <-h.n.C():
		h.t.Fatalf("unexpected notice: %v", n)
	default:
	}
}
